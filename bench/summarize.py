#!/usr/bin/env python3
"""Ratios of Castor's figures to PyTorch's from one run of bench/device_call.sh on one model
(its castor.jsonl, torch.jsonl and gpu.txt).

  summarize.py castor.jsonl torch.jsonl gpu.txt   # prints a Markdown table

Speed ratio: Castor img/s / PyTorch img/s; memory ratio: Castor peak / PyTorch peak
(torch.cuda.max_memory_allocated against the bytes castor-run's backend allocated).
"""
import json
import sys


def lines(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip().startswith("{")]


def main(castor_path, torch_path, gpu_path):
    castor = {r["precision"]: r for r in lines(castor_path)}
    torch = {r["mode"]: r for r in lines(torch_path)}
    gpu = open(gpu_path).read().strip()
    print(f"GPU: {gpu}\n")
    print("| Castor | img/s | peak GiB | vs PyTorch | img/s | peak GiB | speed ratio | memory ratio |")
    print("|---|---|---|---|---|---|---|---|")
    pairs = [("fp16", "amp-fp16-cl"), ("fp16", "compile-fp16-cl"), ("bf16", "amp-bf16-cl"), ("bf16", "compile-bf16-cl"),
             ("fp32", "fp32")]
    for prec, mode in pairs:
        c, t = castor.get(prec), torch.get(mode)
        if not c or not t:
            continue
        print(f"| {prec} | {c['img_per_s']:.0f} | {c['peak_gib']:.2f} | {mode} | {t['img_per_s']:.0f} | "
              f"{t['peak_gib']:.2f} | {c['img_per_s'] / t['img_per_s']:.3f} | {c['peak_gib'] / t['peak_gib']:.3f} |")
    if "fp16" in castor and "fp32" in castor:
        print(f"\nCastor fp16 over fp32: {castor['fp16']['img_per_s'] / castor['fp32']['img_per_s']:.2f}x")
    if "amp-fp16-cl" in torch and "fp32" in torch:
        print(f"PyTorch amp-fp16-cl over fp32: {torch['amp-fp16-cl']['img_per_s'] / torch['fp32']['img_per_s']:.2f}x")
    for prec, c in castor.items():
        ms = c.get("kernel_ms", {})
        total = c.get("kernel_total_ms", 0) or 1
        parts = ", ".join(f"{k} {v:.1f} ms ({100 * v / total:.0f}%)" for k, v in sorted(ms.items(), key=lambda kv: -kv[1]))
        print(f"\nCastor {prec} kernel time by category ({c.get('kernel_total_ms', 0):.1f} ms, one step kernel by "
              f"kernel; graph-replayed step {c['median_ms']:.1f} ms): {parts}; loss {c.get('loss_first')} -> "
              f"{c.get('loss_last')}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
