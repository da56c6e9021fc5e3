#!/usr/bin/env python3
"""A device call's output as lines of docs/records/<date>.jsonl (docs/records/README.md): one
`call` line, then a `bench` line per castor.jsonl row (with `torch_same_call`: PyTorch's img/s of
the same model and batch in the same call, by mode), a `torch` line per torch.jsonl row and a
`log` line per tests.jsonl row, each with the call's date, name and commit.

  record_call.py OUT_DIR --call 2026-12-07-h100-timm/call1 --commit 989a9f6 --what "..." \
      [--plans COMMIT] >> docs/records/2026-12-07.jsonl

Also prints, to stderr, the Markdown rows Castor / eager AMP of every model.
"""
import argparse
import json
import os
import sys

BENCH_KEYS = ("model", "precision", "batch", "plan", "variant", "label", "build", "steps", "img_per_s", "median_ms",
              "peak_gib", "predicted_gib", "kernel_total_ms", "kernel_ms", "op_ms", "load_s", "first_step_s",
              "fused_ways", "tuned", "wall_s", "launches", "generated", "loss_first", "loss_last")


def rows(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip().startswith("{")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--call", required=True, help="<date>-<gpu>-<topic>[/callN]")
    ap.add_argument("--commit", required=True, help="the runtime the call ran")
    ap.add_argument("--plans", help="the compiler of its plans, where another")
    ap.add_argument("--what", default="", help="what the call ran")
    a = ap.parse_args()
    date = a.call[:10]
    gpu_line = open(os.path.join(a.out, "gpu.txt")).read().strip().splitlines()[0]
    gpu, driver = [s.strip() for s in gpu_line.split(",")[:2]]
    common = dict(date=date, call=a.call, gpu=gpu)
    call = dict(kind="call", **common, driver=driver, commit=a.commit, what=a.what)
    if a.plans:
        call["plans"] = a.plans
    print(json.dumps(call))
    torch = rows(os.path.join(a.out, "torch.jsonl"))
    for r in rows(os.path.join(a.out, "castor.jsonl")):
        line = dict(kind="bench", **common, commit=a.commit, **{k: r[k] for k in BENCH_KEYS if k in r})
        same = {t["mode"]: t["img_per_s"] for t in torch if t["model"] == r.get("model") and t["batch"] == r.get("batch")}
        if same:
            line["torch_same_call"] = same
        print(json.dumps(line))
        eager = same.get("amp-fp16-cl")
        peak = next((t["peak_gib"] for t in torch if t["model"] == r.get("model") and t["mode"] == "amp-fp16-cl"), None)
        if eager:
            print(f"| {r['model']} ({r['batch']}) | {r['img_per_s']:,.0f} | {eager:,.0f} | "
                  f"**{r['img_per_s'] / eager:.2f}** | {r['peak_gib']} ({peak}) |", file=sys.stderr)
    for t in torch:
        print(json.dumps(dict(kind="torch", **common, **{k: t[k] for k in ("system", "model", "mode", "batch", "img_per_s",
                                                                          "ms_per_step", "peak_gib", "warmup_s") if k in t})))
    for t in rows(os.path.join(a.out, "tests.jsonl")):
        print(json.dumps(dict(kind="log", **common, commit=a.commit, test=t["test"], rc=t["rc"], seconds=t["seconds"],
                              lines=[t["summary"]] if t.get("summary") else [])))


if __name__ == "__main__":
    main()
