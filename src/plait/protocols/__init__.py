"""Protocols other programs speak with plait agents: `plait.protocols.mcp` (a Model Context
Protocol server of agents) and `plait.protocols.a2a` (Agent2Agent: serve an agent, call a
remote one). The HTTP protocols of the server (OpenAI-compatible, AG-UI) live in
`plait.server`."""
