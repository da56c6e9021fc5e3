#!/usr/bin/env python3
"""Draws the memory report of `castor compile --report DIR` (DIR/memory.json): the planned memory
over the step's kernels, stacked by kind, with the arena, the predicted peak and the peak kernel
marked (memory.png, memory.svg), and report.html with the picture beside the table of saved and
recomputed tensors.

Usage: castor-plot-memory.py DIR
"""
import html
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

GIB = float(1 << 30)
COLORS = {
    "parameters": "#4c72b0",
    "optimizer state": "#8172b2",
    "inputs": "#937860",
    "forward temporaries": "#ccb974",
    "saved activations": "#dd8452",
    "recomputed": "#55a868",
    "gradients": "#c44e52",
    "workspace": "#8c8c8c",
}


def draw(report, out_dir):
    kernels = report["kernels"]
    x = [k["index"] for k in kernels]
    kinds = list(report["kinds"])
    series = [[k["bytes"][kind] / GIB for k in kernels] for kind in kinds]
    kinds.append("workspace")
    series.append([report["workspace_bytes"] / GIB] * len(kernels))
    fig, ax = plt.subplots(figsize=(13, 5.5))
    ax.stackplot(x, series, labels=kinds, colors=[COLORS.get(k, None) for k in kinds], linewidth=0)
    beside = (report["beside_arena_bytes"] + report["workspace_bytes"]) / GIB
    ax.axhline(report["predicted_peak_bytes"] / GIB, color="black", linestyle="--", linewidth=1,
               label=f"predicted peak {report['predicted_peak_bytes'] / GIB:.2f} GiB (arena "
                     f"{report['arena_bytes'] / GIB:.2f} + {beside:.2f} beside it)")
    peak = report["peak"]
    ax.axvline(peak["kernel"], color="black", linewidth=0.8, alpha=0.6)
    name = kernels[peak["kernel"]]["name"] if 0 <= peak["kernel"] < len(kernels) else ""
    ax.annotate(f"peak of live tensors {peak['live_bytes'] / GIB:.2f} GiB at kernel {peak['kernel']}\n{name[:60]}",
                xy=(peak["kernel"], peak["live_bytes"] / GIB), xytext=(0.55, 0.93), textcoords="axes fraction",
                fontsize=8, arrowprops=dict(arrowstyle="->", linewidth=0.8),
                bbox=dict(boxstyle="round", facecolor="white", alpha=0.9))
    if report["backward_starts_after_kernel"] >= 0:
        ax.axvline(report["backward_starts_after_kernel"], color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("kernel (execution order)")
    ax.set_ylabel("GiB")
    ax.set_xlim(0, max(x) if x else 1)
    ax.set_title(f"Planned device memory of {report['function']} (recompute: {report['recompute_policy']})")
    ax.set_ylim(0, report["predicted_peak_bytes"] / GIB * 1.15)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, title="kind", title_fontsize=8)
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(out_dir, "memory." + ext), dpi=120)
    plt.close(fig)


def table(report):
    rows = sorted(report["saved"], key=lambda r: -r["bytes"])
    cells = "".join(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td align=right>{:.1f}</td><td align=right>{}</td>"
        "<td>{}</td></tr>".format(html.escape(r["name"] or "-"), html.escape(r["op"]), html.escape(r["type"]),
                                  r["status"], r["bytes"] / (1 << 20), r["recompute_flops"] or "",
                                  html.escape(r["why"]))
        for r in rows)
    return ("<table border=1 cellspacing=0 cellpadding=3><tr><th>layer</th><th>op</th><th>type</th><th>status</th>"
            "<th>MiB</th><th>recompute FLOPs</th><th>why</th></tr>" + cells + "</table>")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    with open(os.path.join(out_dir, "memory.json")) as f:
        report = json.load(f)
    draw(report, out_dir)
    saved = sum(r["bytes"] for r in report["saved"] if r["status"] == "saved")
    recomputed = sum(r["bytes"] for r in report["saved"] if r["status"] == "recomputed")
    with open(os.path.join(out_dir, "report.html"), "w") as f:
        f.write("<html><head><meta charset=utf-8><title>castor memory report</title></head><body>"
                f"<h2>Planned memory of {html.escape(report['function'])}</h2>"
                f"<p>Predicted peak {report['predicted_peak_bytes'] / GIB:.2f} GiB: arena "
                f"{report['arena_bytes'] / GIB:.2f} GiB, inputs and staging {report['beside_arena_bytes'] / GIB:.2f} GiB, "
                f"workspace limit {report['workspace_bytes'] / GIB:.2f} GiB. Saved for the backward "
                f"{saved / GIB:.2f} GiB; recomputed {recomputed / GIB:.2f} GiB at "
                f"{report['recompute_flops'] / 1e9:.2f} GFLOP per step.</p>"
                "<div style='display:flex;gap:16px;align-items:flex-start'>"
                "<img src='memory.png' style='max-width:55%'>" + table(report) + "</div></body></html>")


if __name__ == "__main__":
    main()
