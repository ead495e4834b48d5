"""Plots bench/results/2026-11-27-s36.md calls 3-4 (block-sparse forward, backward, FlexAttention; H100) into
docs/img/block-sparse-h100-s36.png. The numbers are copied from that file; rerun after a new measurement."""
# Plot of bench/results/2026-11-27-s36.md calls 3 (forward + FlexAttention) and 4 (backward).
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
share = [1, 0.5, 0.25, 0.1, 0]
fwd = {"full": [5.684, 3.061, 1.722, 0.999, 0.304], "causal": [3.302, 1.783, 1.104, 0.644, 0.289]}
fwd_dense = {"full": 5.679, "causal": 3.294}
flex = {"full": [10.463, 5.493, 2.890, 1.427, 0.506], "causal": [5.284, 2.811, 1.567, 0.885, 0.418]}
bwd = {"full": [19.108, 10.389, 5.599, 3.224, 1.533], "causal": [10.118, 5.865, 3.513, 2.451, 1.362]}
bwd_dense = {"full": 18.717, "causal": 9.851}
fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
for ax, mode in zip(axes, ["full", "causal"]):
    ax.plot(share, fwd[mode], "o-", label="fastattn forward")
    ax.plot(share, flex[mode], "s--", label="FlexAttention forward (same masks)")
    ax.plot(share, bwd[mode], "^-", label="fastattn backward")
    ax.plot([0, 1], [0, fwd_dense[mode]], ":", color="C0", alpha=0.6, label="share x dense forward")
    ax.plot([0, 1], [0, bwd_dense[mode]], ":", color="C2", alpha=0.6, label="share x dense backward")
    ax.set_xlabel("kept share of 128 x 128 blocks")
    ax.set_ylabel("ms (median of 20 calls)")
    ax.set_title(f"{mode} mask x random block mask")
    ax.grid(alpha=0.3)
axes[0].legend(fontsize=8)
fig.suptitle("Block-sparse attention, H100 80GB HBM3, b4 s8192 h32 d128 bf16 (2026-11-28; bench/results/2026-11-27-s36.md calls 3-4)", fontsize=9)
fig.tight_layout()
fig.savefig("docs/img/block-sparse-h100-s36.png", dpi=110)
