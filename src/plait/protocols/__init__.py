"""Protocols: plait agents served over standard protocols, and their clients."""
