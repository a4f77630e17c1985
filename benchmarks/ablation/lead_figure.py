"""Error against lead for an ablation: the variant, its base model, reference models and the dataset's references.

``python -m dandelion.benchmarks.ablation.variants VARIANT --datasets KEY ... --table --figure DIR`` draws, per
dataset, the test VRMSE of the autoregressive rollout at every lead (the cells' ``curves``): the mean over seeds with
the seeds' range shaded for the variant, its base model and the ``references`` models, and the dataset's reference
forecasts (persistence, linear AR and, where the dataset has one, the exact oracle: ``results_dir/<key>/*.json``) as
dashed lines. Issue #67 item 5 asks for the transport dataset's version: the new model's rollout beside the oracle's.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

__all__ = ["current_records", "lead_curves", "lead_figure"]


def _curve(rec: dict) -> np.ndarray | None:
    c = ((rec.get("curves") or {}).get("vrmse") or {}).get("mean")
    return None if c is None else np.asarray(c, dtype=float)


def current_records(recs: list[dict], protocol: str | None, architecture: str | None, prefix: str = "") -> list[dict]:
    """The records made under ``protocol`` and on the network ``architecture`` (each check skipped when None): a
    cell's own ``protocol_hash`` and ``architecture``, or with ``prefix="base_"`` a variant record's base cell's."""
    return [
        r
        for r in recs
        if (protocol is None or r.get(f"{prefix}protocol_hash") == protocol)
        and (architecture is None or r.get(f"{prefix}architecture") == architecture)
    ]


def lead_curves(
    results_dir, variant: str, base: str, key: str, references=("sfno",), protocol=None, architectures=None
) -> dict:
    """``{label: (n_seeds, n_leads) array}`` for the base model, the variant and the reference models (cells of
    another ``protocol`` or, with ``architectures`` (model -> fingerprint), another network left out, as
    :func:`~dandelion.benchmarks.ablation.variants.ablation_table` does), and
    ``{label: (n_leads,)}`` under ``"references"`` for the dataset's reference forecasts."""
    root = Path(results_dir)
    out: dict = {}

    archs = architectures or {}

    def stack(paths, model, prefix):
        recs = [json.loads(p.read_text()) for p in sorted(paths)]
        curves = [_curve(r) for r in current_records(recs, protocol, archs.get(model), prefix)]
        curves = [c for c in curves if c is not None]
        if curves:
            n = min(len(c) for c in curves)
            return np.stack([c[:n] for c in curves])
        return None

    for label, paths, model, prefix in [
        (base, (root / key / base).glob("seed*.json"), base, ""),
        (f"{base} + {variant}", (root / "ablation" / variant / key).glob("seed*.json"), base, "base_"),
        *[(m, (root / key / m).glob("seed*.json"), m, "") for m in references],
    ]:
        arr = stack(paths, model, prefix)
        if arr is not None:
            out[label] = arr
    refs = {}
    for p in sorted((root / key).glob("*.json")):
        rec = json.loads(p.read_text())
        c = _curve(rec)
        if c is not None:
            refs[rec.get("label") or p.stem] = c
    out["references"] = refs
    return out


def lead_figure(curves: dict, path, title: str = "") -> Path:
    """Draw :func:`lead_curves`' output (log VRMSE against lead) to ``path`` (PNG); returns the path."""
    from dandelion.reporting.plotting import pyplot, save_figure

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for label, arr in curves.items():
        if label == "references":
            continue
        lead = np.arange(1, arr.shape[1] + 1)
        ax.plot(lead, arr.mean(0), label=f"{label} ({arr.shape[0]} seeds)")
        if arr.shape[0] > 1:
            ax.fill_between(lead, arr.min(0), arr.max(0), alpha=0.2)
    for label, c in curves.get("references", {}).items():
        ax.plot(np.arange(1, len(c) + 1), c, "--", lw=1.2, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("lead (frames)")
    ax.set_ylabel("test VRMSE")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path, dpi=110)
