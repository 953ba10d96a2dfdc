"""The contract and the kernel: the `Agent` interface and `AgentContext`, hooks, steps,
interrupt and resume, the internal run context and run state, checkpoints, and the kernel's
one door into an agent with its handoff loop. Everything above builds on these."""
