"""Diagnostic behind benchmarks/results/cpu/NOTES.md ("The change that made the models forecast").

A pointwise linear autoregression: the same (n_in*C + C + 1) -> C channel map at every grid point (older
frames as differences to the newest, the newest frame, a bias), fitted by area-weighted least squares to
the one-step increments of the train split, scored against persistence by the next-step area-weighted
MSE in normalised units on the valid and test splits.

Usage::

    python docs/linear_ar_diagnostic.py data/benchmark/cpu/galewsky_32x64
"""
import sys, torch
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.metrics import loss_weights
path = sys.argv[1]
def load(split):
    ds = WindowDataset(path, split, n_in=4, n_out=1)
    xs, ys = zip(*[(ds[i]["x"], ds[i]["y"][0]) for i in range(len(ds))])
    return torch.stack(xs).double(), torch.stack(ys).double(), ds
X, Y, ds = load("train")
C = Y.shape[1]
w = loss_weights(ds.grid).double()  # (nlat, 1)
def feats(X):
    last = X[:, -C:]
    return torch.cat([X - last.repeat(1, X.shape[1] // C, 1, 1), last, torch.ones_like(last[:, :1])], 1)  # differences to the last frame, last frame, bias
F = feats(X); D = Y - X[:, -C:]
sw = w.sqrt()
A = (F * sw).permute(0, 2, 3, 1).reshape(-1, F.shape[1]); b = (D * sw).permute(0, 2, 3, 1).reshape(-1, C)
coef = torch.linalg.lstsq(A, b).solution
for split in ("valid", "test"):
    Xv, Yv, _ = load(split)
    pred = Xv[:, -C:] + torch.einsum("bfij,fc->bcij", feats(Xv), coef)
    mse = lambda p: float(((p - Yv) ** 2 * w).mean())
    print(split, "persistence MSE %.4g" % mse(Xv[:, -C:]), "pointwise linear AR MSE %.4g" % mse(pred), "ratio %.3f" % (mse(pred) / mse(Xv[:, -C:])))
