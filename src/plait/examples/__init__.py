"""Runnable examples that ship with plait (`plait demo` runs the router example)."""
