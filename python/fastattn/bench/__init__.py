"""`python -m fastattn.bench`: fastattn's forward against PyTorch SDPA backends (cuDNN, flash,
efficient) and FlexAttention on named presets, or on a CPU-only machine the CPU backend against
torch's CPU SDPA (or numpy). Writes results.json, results.md and results.png into --out."""
