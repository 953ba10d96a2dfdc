"""`StateGraph`: nodes over a shared state, run in super-steps; the compiled graph is an Agent."""

from plait.graph.state_graph import END, START, CompiledGraph, StateGraph, append, merge

__all__ = ["END", "START", "CompiledGraph", "StateGraph", "append", "merge"]
