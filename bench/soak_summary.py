"""Summary of a soak run (bench/soak_gpu.sh): memory flat after the first step, step time drift,
skipped steps against the loss scaler's backoffs. Writes OUT/summary.json; exit 1 when a check
fails.

Usage: soak_summary.py OUT_DIR [BATCH]
"""
import csv
import json
import statistics
import sys


def main():
    out = sys.argv[1]
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    rows = [json.loads(line) for line in open(f"{out}/soak.jsonl") if line.startswith('{"step"')]
    samples = list(csv.DictReader(open(f"{out}/samples.csv")))
    exit_line = open(f"{out}/soak_stdout.txt").read().strip().splitlines()[-1]
    steps = len(rows)
    # Step time: seconds per step from the logged img/s; medians of blocks of 1000 steps, the
    # first block (tuning, warm-up) left out of the drift.
    batch_seconds = [batch / r["img_per_s"] for r in rows if r["img_per_s"]]
    block = max(1, min(1000, len(batch_seconds) // 10))
    medians = [statistics.median(batch_seconds[i:i + block]) for i in range(0, len(batch_seconds) - block + 1, block)]
    drift = (medians[-1] / medians[1] - 1) if len(medians) > 2 else float("nan")
    spread = (max(medians[1:]) / min(medians[1:]) - 1) if len(medians) > 2 else float("nan")
    # Memory: the samples after the first 10 s (the first steps allocate and tune), without the
    # last one (it may catch the process tearing down).
    def series(key):
        return [(float(s["seconds"]), float(s[key])) for s in samples[:-1] if s.get(key)]
    report = {"steps": steps, "exit": exit_line}
    ok = exit_line.endswith("exit 0") and steps > 0
    for key, unit in (("pid_rss_kib", "KiB"), ("gpu_used_mib", "MiB"), ("process_gpu_mib", "MiB")):
        s = series(key)
        settled = [v for t, v in s if t >= 10]
        if not settled:
            continue
        report[key] = {"first_settled": settled[0], "min": min(settled), "max": max(settled), "last": settled[-1],
                       "samples": len(settled), "unit": unit}
    gpu = report.get("process_gpu_mib") or report.get("gpu_used_mib")
    if gpu:
        ok = ok and gpu["max"] == gpu["min"]
    rss = report.get("pid_rss_kib")
    if rss:
        # Host memory: flat within 1% (the allocator's page-level noise), no growth trend.
        ok = ok and rss["max"] <= rss["first_settled"] * 1.01
    # Skipped steps: every one must be a loss-scale backoff.
    skipped, backoffs, previous = [], 0, None
    for r in rows:
        if previous is not None and r.get("skipped_steps", 0) > previous.get("skipped_steps", 0):
            skipped.append(r["step"])
            backoffs += r.get("loss_scale", 0) < previous.get("loss_scale", 0)
        previous = r
    first = rows[0] if rows else {}
    if first.get("skipped_steps", 0) > 0:  # the first step's own skip
        skipped.insert(0, first["step"])
        backoffs += 1
    report["skipped_steps"] = {"count": len(skipped), "at": skipped[:50], "scaler_backoffs": backoffs,
                               "final": rows[-1].get("skipped_steps") if rows else None,
                               "final_loss_scale": rows[-1].get("loss_scale") if rows else None}
    ok = ok and backoffs == len(skipped) and all(r["loss"] == r["loss"] for r in rows if r.get("loss") is not None
                                                 and r["step"] not in skipped)
    report["step_ms"] = {"block_medians": [round(1e3 * m, 4) for m in medians],
                         "drift_last_vs_second_block": drift, "spread_after_first_block": spread}
    report["ok"] = ok
    json.dump(report, open(f"{out}/summary.json", "w"), indent=1)
    print(json.dumps(report, indent=1))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
