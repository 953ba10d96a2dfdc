"""Protocols other programs speak with plait agents: `plait.protocols.a2a` (Agent2Agent)."""
