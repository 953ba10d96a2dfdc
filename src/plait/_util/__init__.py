"""Helpers with no knowledge of agents: JSON, records, threads, tasks, fan-in and the like."""
