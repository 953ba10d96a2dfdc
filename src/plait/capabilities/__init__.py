"""Production features, one per module, each on the public seams (`AgentContext` and
`Hooks`): guardrails, usage limits, the loop guard, tracing, record and replay, compaction,
structured output and model fallback."""
