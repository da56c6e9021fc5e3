#!/usr/bin/env python3
"""Mixed-precision training of a torchvision model (ResNet-50 fp16, 100 steps, by default):
Castor (castor-run train) against PyTorch AMP.

Criterion: from identical initial weights on identical batches, Castor's loss follows PyTorch
AMP's: each of the first 20 losses within 2% relative, and the mean of all steps within 2%.

`--model NAME` takes any torchvision classifier whose training-mode export the plan was compiled
from (initializers named as its state_dict: `models/export_torchvision.py`), or timm's model for
`timm-NAME` (scripts/export_model_zoo.py: graph only, the plan compiled with --init kaiming; the
weights come from here), `--steps N` the
length; the plan's precision picks PyTorch's autocast type (fp16 with GradScaler configured as
the plan's loss scaler, bf16 without scaling).

What `run` does (on a machine with torch, torchvision, a GPU and castor-run):
  1. reads the plan (`castor-run inspect --json`): batch, image shape, classes, the model's state
     tensors, AdamW's hyperparameters, the learning-rate schedule (must be constant) and the
     loss scaler's settings; PyTorch is configured from these, so both sides share them exactly;
  2. builds the torchvision model with torch.manual_seed(0) and writes its state_dict
     (parameters and BN running statistics; num_batches_tracked has no Castor counterpart and is
     dropped) as safetensors, after checking its names against the plan's;
  3. writes the data as `castor-run train --data npy:DIR` reads it: images.npy (float16
     [M, 3, 224, 224], so the arrays stay small; both sides widen them exactly to float32) and
     labels.npy (int64 [M]). M = 20 batches: step s (0-based) uses samples (s*B + b) mod M,
     b = 0..B-1, which is the order castor-run feeds them (file order, no shuffling). Images are
     N(0,1) noise plus 0.2 times a class-dependent low-frequency pattern, labels drawn from 100
     of the 1000 classes;
  4. runs castor-run with 0 steps and --save, and checks that every model tensor in the saved
     state equals the weights file bit for bit (names, shapes, values: none was initialized);
  5. trains PyTorch: torch.autocast(fp16) + GradScaler, channels_last, model.train(), AdamW
     (the reference, "amp"); and, to show how far legitimate implementations drift apart on this
     problem, the same in NCHW ("amp_nchw"), the same from weights moved by one float32 ulp
     ("amp_ulp") and plain float32 without TF32 ("fp32"). cuDNN is deterministic (no benchmark);
  6. runs `castor-run train PLAN --device cuda --data npy:DIR --weights W --steps 100 --log-json`;
  7. compares per-step losses (the forward loss of every step, including the steps the loss
     scaler skips; both sides also report which steps were skipped), prints a table, writes the
     JSON result to --out, and exits 1 when the criterion fails (2 on a setup error).

The problem is chosen so that the criterion tests Castor rather than chaos: with AdamW lr 1e-4
the loss falls from 7.0 to about 2.7 in 100 steps, and two legitimate PyTorch AMP runs
(channels_last vs NCHW, or weights one ulp apart) agree within 0.8% on each of the first 20
losses and 0.1% on the mean (H200, torch 2.11). At lr 1e-3 with 10 classes the loss collapsed to
1e-4 within 20 steps, and the same two runs differed by up to 160% on a step.

The loss scaler: from GradScaler's initial scale 65536 both sides skip the first steps while the
scale halves until conv1.weight's fp16 gradient (the largest) fits; the last of these skips is
decided by a few elements near 65504 (on the H200 at scale 16384: 2 of 9408 overflowed in
PyTorch, Castor's largest was 64544), so one side can skip a step that the other applies. Its
trajectory is then one update apart: PyTorch skipped steps 1-3, Castor 1, 2 and 4, and step 4
differed by 2.1%. A plan compiled with --loss-scale-init 8192 (PyTorch's GradScaler takes the
plan's settings) skips no step on either side.

`selftest` needs only numpy and castor-run (no torch, any device): with a small training plan
it checks the safetensors and npy writers against castor-run (weights loaded bit-exactly, the
batch order: with a plan compiled with --lr 0 every step's loss must equal `castor-run infer`
on that step's batch) and the criterion logic on made-up loss lists.

  python3 compare_amp.py run --plan P.plan --castor-run BIN --work DIR --out R.json
  python3 compare_amp.py selftest --plan TINY_LR0.plan --castor-run BIN --work DIR

A selftest plan: python3 models/resnet.py --arch tiny --weights none -o /tmp/tiny.onnx &&
  build/bin/castor compile /tmp/tiny.onnx --init kaiming --batch 2 --train --precision fp16 \
    --optimizer adamw --lr 0 --weight-decay 0.01 -o /tmp/tiny_lr0.plan
"""
import argparse
import hashlib
import json
import math
import os
import struct
import subprocess
import sys
import time

import numpy as np

STEPS = 100
FIRST = 20            # each of the first FIRST losses within TOL relative
TOL = 0.02            # ... and the mean of all STEPS within TOL relative
DISTINCT_BATCHES = 20  # M = DISTINCT_BATCHES * batch samples, cycled
LABEL_CLASSES = 100    # labels drawn from this many of the plan's classes
SIGNAL = 0.2           # amplitude of the class pattern over N(0,1) pixel noise
DATA_SEED = 20261130
MOMENT_SUFFIXES = (".exp_avg", ".exp_avg_sq", ".momentum_buffer")


def die(message):
    """A setup error (exit status 2; a failed criterion exits 1)."""
    print(message, file=sys.stderr)
    sys.exit(2)


# ---------------------------------------------------------------------------------------------
# files: safetensors (8-byte little-endian header length, JSON header, raw little-endian data)

_ST = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I64": "<i8", "I32": "<i4"}
_RAW = {"BF16": "<u2"}  # read as raw bits (numpy has no bfloat16): compared, never computed with


def write_safetensors(path, tensors):
    names = {np.dtype(v): k for k, v in _ST.items()}
    header, offset, blobs = {}, 0, []
    for name, value in tensors.items():
        value = np.ascontiguousarray(value, dtype=np.dtype(value.dtype).newbyteorder("<"))
        data = value.tobytes()
        header[name] = {"dtype": names[value.dtype], "shape": list(value.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (length,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + length].decode())
    header.pop("__metadata__", None)
    out = {}
    for name, h in header.items():
        begin, end = h["data_offsets"]
        dtype = _ST.get(h["dtype"]) or _RAW[h["dtype"]]
        out[name] = np.frombuffer(blob[8 + length + begin:8 + length + end], dtype).reshape(h["shape"])
    return out


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------
# the plan

def plan_info(castor_run, plan):
    """What the comparison needs from the plan, read from `castor-run inspect --json`."""
    r = subprocess.run([castor_run, "inspect", plan, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        die(f"castor-run inspect {plan} failed:\n{r.stderr}")
    p = json.loads(r.stdout)["plan"]
    tensors = {t["id"]: t for t in p["tensors"]}
    shape = lambda tid: [int(d) for d in tensors[tid]["shape"]]
    inputs = {b["name"]: shape(b["tensor"]) for b in p["inputs"]}
    outputs = {b["name"] for b in p["outputs"]}
    kernels = p["kernels"]
    attr = lambda k, name: (lambda a: a["floats"]["values"][0] if "floats" in a else
                            int(a["ints"]["values"][0]) if "ints" in a else a["s"])(k["attrs"][name])
    of = lambda op: [k for k in kernels if k["op"] == op]
    params = p["parameters"]
    trainable = {q["name"] for q in params if q.get("trainable")}
    model_state = [q["name"] for q in params if not q["name"].startswith("castor.")
                   and not any(q["name"].endswith(s) and q["name"][:-len(s)] in trainable for s in MOMENT_SUFFIXES)]
    info = dict(batch=inputs["images"][0], image_shape=inputs["images"][1:],
                classes=shape(of("softmax_cross_entropy")[0]["inputs"][0])[1],
                model_state=model_state, trainable=sorted(trainable), target=p["target"])
    loss = of("softmax_cross_entropy")[0]
    info["label_smoothing"] = attr(loss, "label_smoothing")
    if attr(loss, "reduction") != "mean":
        die("the plan's loss is not the mean cross-entropy")
    adamw = of("adamw_update")
    if len(adamw) != len(trainable):
        die(f"the plan updates {len(adamw)} of {len(trainable)} trainable parameters with AdamW; "
                 "this comparison needs an AdamW plan (castor compile --optimizer adamw)")
    hyper = {(attr(k, "beta1"), attr(k, "beta2"), attr(k, "eps"), attr(k, "weight_decay")) for k in adamw}
    if len(hyper) != 1:
        die("the plan's parameters have different AdamW settings (--no-decay-bn-bias?); "
                 "compile without it so that one torch.optim.AdamW group matches")
    (beta1, beta2, eps, wd), = hyper
    sched = of("lr_schedule")[0]
    if attr(sched, "kind") != "constant" or attr(sched, "warmup_steps") != 0:
        die("the plan's learning rate is not constant (compile without --schedule/--warmup-steps)")
    info["adamw"] = dict(lr=attr(sched, "base_lr"), betas=(beta1, beta2), eps=eps, weight_decay=wd)
    info["f16_tensors"] = sum(1 for t in tensors.values() if t["dtype"] == "F16")
    info["bf16_tensors"] = sum(1 for t in tensors.values() if t["dtype"] == "BF16")
    if info["f16_tensors"]:
        info["amp_dtype"] = "float16"
    elif info["bf16_tensors"]:
        info["amp_dtype"] = "bfloat16"
    else:
        die("the plan computes nothing in float16 or bfloat16 (compile with --precision fp16 or bf16)")
    scaler = of("update_loss_scale")
    init = [q for q in params if q["name"] == "castor.loss_scale"]
    if info["amp_dtype"] == "float16":
        if not scaler or not init or "loss_scale" not in outputs:
            die("the fp16 plan has no dynamic loss scaling (compile with --loss-scale dynamic)")
        info["grad_scaler"] = dict(init_scale=float(init[0]["init_value"]), growth_factor=attr(scaler[0], "growth"),
                                   backoff_factor=attr(scaler[0], "backoff"),
                                   growth_interval=attr(scaler[0], "interval"))
    elif scaler:
        die("the bf16 plan scales its loss; PyTorch AMP in bf16 does not (compile without --loss-scale)")
    else:
        info["grad_scaler"] = None
    return info


# ---------------------------------------------------------------------------------------------
# data

def make_data(directory, count, image_shape, classes, seed=DATA_SEED):
    """images.npy (float16 [count, C, H, W]) and labels.npy (int64 [count]) in `directory`.

    Labels are drawn from LABEL_CLASSES of the `classes`; an image of label c is N(0,1) noise
    plus SIGNAL times a fixed pattern of c (a 4x4 grid of N(0,1) per channel, blown up)."""
    rng = np.random.default_rng(seed)
    used = np.sort(rng.choice(classes, size=min(LABEL_CLASSES, classes), replace=False))
    labels = used[rng.integers(0, len(used), size=count)].astype(np.int64)
    c, h, w = image_shape
    grid = rng.standard_normal((len(used), c, 4, 4)).astype(np.float32)
    patterns = np.repeat(np.repeat(grid, -(-h // 4), axis=2), -(-w // 4), axis=3)[:, :, :h, :w]
    slot = np.searchsorted(used, labels)
    images = np.empty((count, c, h, w), np.float16)
    for i in range(count):  # one image at a time: no float32 copy of the whole set
        images[i] = rng.standard_normal((c, h, w), dtype=np.float32) + SIGNAL * patterns[slot[i]]
    os.makedirs(directory, exist_ok=True)
    np.save(os.path.join(directory, "images.npy"), images)
    np.save(os.path.join(directory, "labels.npy"), labels)
    return images, labels, used


def batch_indices(step, batch, count):
    """The samples of 0-based step `step`, as castor-run's npy loader takes them."""
    return (step * batch + np.arange(batch)) % count


# ---------------------------------------------------------------------------------------------
# castor-run

def castor_train(castor_run, plan, device, data_dir, weights, steps, work, tag, save=None):
    """Runs castor-run train; returns its per-step records (the --log-json lines) and wall time."""
    log = os.path.join(work, f"castor_{tag}.jsonl")
    cmd = [castor_run, "train", plan, "--device", device, "--data", "npy:" + data_dir, "--weights", weights,
           "--steps", str(steps), "--log-json", log] + (["--save", save] if save else [])
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.time() - t0
    with open(os.path.join(work, f"castor_{tag}.out"), "w") as f:
        f.write(" ".join(cmd) + "\n" + r.stdout + r.stderr)
    if r.returncode != 0:
        die(f"castor-run failed ({r.returncode}): {' '.join(cmd)}\n{(r.stdout + r.stderr)[-3000:]}")
    with open(log) as f:
        records = [json.loads(line) for line in f if line.strip()]
    if len(records) != steps:
        die(f"castor-run logged {len(records)} steps, not {steps} ({log})")
    return records, seconds, r.stdout.strip()


def check_loaded(castor_run, plan, device, data_dir, weights, work, names):
    """castor-run with 0 steps, --save: every model tensor must be the file's, bit for bit."""
    state = os.path.join(work, "castor_state0.safetensors")
    castor_train(castor_run, plan, device, data_dir, weights, 0, work, "load_check", save=state)
    saved, given = read_safetensors(state), read_safetensors(weights)
    bad = [n for n in names if n not in saved or saved[n].dtype != given[n].dtype
           or saved[n].shape != given[n].shape or saved[n].tobytes() != given[n].tobytes()]
    os.remove(state)
    if bad:
        die(f"castor-run did not load {len(bad)} tensors as written, e.g. {bad[:5]}")
    return len(names)


def castor_losses(records):
    skipped = [r.get("skipped_steps", 0) for r in records]
    return dict(loss=[math.nan if r["loss"] is None else float(r["loss"]) for r in records],
                skipped=[bool(s - (skipped[i - 1] if i else 0)) for i, s in enumerate(skipped)],
                loss_scale=[r.get("loss_scale") for r in records],
                img_per_s=[r.get("img_per_s") for r in records])


# ---------------------------------------------------------------------------------------------
# PyTorch

VARIANTS = {  # name: (autocast fp16 + GradScaler, channels_last, weights one ulp away)
    "amp": (True, True, False),
    "amp_nchw": (True, False, False),
    "amp_ulp": (True, True, True),
    "fp32": (False, True, False),
}


def torch_model(name, classes):
    """torchvision's model NAME, or timm's for "timm-NAME" (scripts/export_model_zoo.py's exports)."""
    import torch
    torch.manual_seed(0)
    if name.startswith("timm-"):
        import timm
        return timm.create_model(name[len("timm-"):], pretrained=False, num_classes=classes)
    import torchvision
    return torchvision.models.get_model(name, weights=None, num_classes=classes)


def torch_only_buffers(model, plan_names):
    """The model's buffers the plan does not hold (timm's constant index tables, which the export
    folded into the graph): they keep the values the constructor gave them. A parameter the plan
    lacks is an error."""
    params = {k for k, _ in model.named_parameters()}
    only = {k for k in model.state_dict() if k not in plan_names and not k.endswith("num_batches_tracked")}
    if only & params:
        die(f"parameters missing from the plan: {sorted(only & params)}")
    return only


def one_ulp_away(tensors, seed=7):
    rng = np.random.default_rng(seed)
    return {k: np.nextafter(v, np.where(rng.random(v.shape) < 0.5, np.inf, -np.inf).astype(v.dtype))
            for k, v in tensors.items()}


def torch_train(model_name, variant, initial, images, labels, info, steps, device):
    import torch
    import torch.nn.functional as F
    amp, channels_last, ulp = VARIANTS[variant]
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = torch_model(model_name, info["classes"])
    weights = one_ulp_away(initial) if ulp else initial
    kept = torch_only_buffers(model, set(initial))
    missing, unexpected = model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in weights.items()},
                                                strict=False)
    if unexpected or any(not k.endswith("num_batches_tracked") and k not in kept for k in missing):
        die(f"state_dict mismatch: missing {missing}, unexpected {unexpected}")
    model = model.to(device).to(memory_format=fmt).train()
    opt = torch.optim.AdamW(model.parameters(), **info["adamw"])
    dtype = getattr(torch, info["amp_dtype"])
    scaled = amp and info["grad_scaler"] is not None  # GradScaler for fp16 only, as AMP recipes do
    scaler = torch.amp.GradScaler(device, enabled=scaled, **(info["grad_scaler"] or {}))
    x_all, y_all = torch.from_numpy(images).to(device), torch.from_numpy(labels).to(device)
    out = dict(loss=[], skipped=[], loss_scale=[])
    t0 = time.time()
    for s in range(steps):
        idx = torch.from_numpy(batch_indices(s, info["batch"], len(labels))).to(device)
        x = x_all[idx].float().contiguous(memory_format=fmt)
        y = y_all[idx]
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=dtype, enabled=amp):
            loss = F.cross_entropy(model(x), y, label_smoothing=info["label_smoothing"])
        before = scaler.get_scale() if scaled else 1.0
        scaler.scale(loss).backward()
        scaler.step(opt)  # skipped (no parameter, moment or step-count update) on inf/nan gradients
        scaler.update()
        after = scaler.get_scale() if scaled else 1.0
        out["loss"].append(float(loss.detach()))
        out["skipped"].append(after < before)
        out["loss_scale"].append(after)
    out["seconds"] = time.time() - t0
    del model, opt, x_all, y_all
    torch.cuda.empty_cache()
    return out


# ---------------------------------------------------------------------------------------------
# the criterion

def judge(reference, losses, first=FIRST, tol=TOL):
    """Each of the first `first` losses within `tol` relative of the reference's, and the mean of
    all within `tol` relative. Non-finite values and a length mismatch fail."""
    n = len(reference)
    rel = [abs(c - t) / abs(t) if t != 0 else math.inf for c, t in zip(losses, reference)]
    rel = [r if math.isfinite(r) else math.inf for r in rel]
    over = [i + 1 for i in range(min(first, len(rel))) if not rel[i] <= tol]
    mean_ref = float(np.mean(reference)) if n else math.nan
    mean_got = float(np.mean(losses)) if losses else math.nan
    mean_rel = abs(mean_got - mean_ref) / abs(mean_ref) if mean_ref else math.inf
    mean_rel = mean_rel if math.isfinite(mean_rel) else math.inf
    complete = len(losses) == n and n >= first
    return dict(passed=complete and not over and mean_rel <= tol, complete=complete,
                first_max_rel=max(rel[:first]) if rel else math.inf, first_steps_over_tol=over,
                mean_reference=mean_ref, mean=mean_got, mean_rel=mean_rel,
                max_rel_all_steps=max(rel) if rel else math.inf, rel=rel)


def jsonable(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return jsonable(v.item())
    return v


# ---------------------------------------------------------------------------------------------
# run

def cmd_run(a):
    import torch
    os.makedirs(a.work, exist_ok=True)
    out_dir = os.path.dirname(os.path.abspath(a.out))
    os.makedirs(out_dir, exist_ok=True)
    info = plan_info(a.castor_run, a.plan)
    print(f"plan {a.plan}: batch {info['batch']}, images {info['image_shape']}, {info['classes']} classes, "
          f"{len(info['model_state'])} model tensors, AdamW {info['adamw']}, scaler {info['grad_scaler']}", flush=True)

    # (2) initial weights: the torchvision model under torch.manual_seed(0)
    model = torch_model(a.model, info["classes"])
    kept = torch_only_buffers(model, set(info["model_state"]))
    if kept:
        print(f"buffers only in torch, kept as constructed: {sorted(kept)}", flush=True)
    initial = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()
               if not k.endswith("num_batches_tracked") and k not in kept}
    if set(initial) != set(info["model_state"]):
        die(f"{a.model} state_dict and the plan disagree: only in torch {sorted(set(initial) - set(info['model_state']))}, "
            f"only in the plan {sorted(set(info['model_state']) - set(initial))}")
    weights = os.path.join(a.work, f"{a.model}_seed0.safetensors")
    write_safetensors(weights, initial)

    # (3) data
    count = DISTINCT_BATCHES * info["batch"]
    t0 = time.time()
    data_dir = os.path.join(a.work, "data")
    images, labels, used = make_data(data_dir, count, info["image_shape"], info["classes"])
    print(f"data: {count} samples ({DISTINCT_BATCHES} batches, cycled), labels from {len(used)} classes, "
          f"{time.time() - t0:.1f} s", flush=True)

    # (4) the weights reach castor-run as written
    loaded = check_loaded(a.castor_run, a.plan, a.device, data_dir, weights, a.work, info["model_state"])
    print(f"castor-run loaded all {loaded} model tensors bit-exactly", flush=True)

    # (5) PyTorch
    ref = {}
    for v in (["amp"] if a.no_floor else list(VARIANTS)):
        ref[v] = torch_train(a.model, v, initial, images, labels, info, a.steps, "cuda")
        print(f"torch {v}: {ref[v]['seconds']:.1f} s, losses {ref[v]['loss'][0]:.4f} .. {ref[v]['loss'][-1]:.4f}, "
              f"skipped steps {[i + 1 for i, s in enumerate(ref[v]['skipped']) if s]}", flush=True)

    # (6) Castor
    records, castor_s, summary = castor_train(a.castor_run, a.plan, a.device, data_dir, weights, a.steps, a.work, "train")
    castor = castor_losses(records)
    print(f"castor-run: {castor_s:.1f} s ({summary})", flush=True)

    # (7) comparison
    t = ref["amp"]
    verdict = judge(t["loss"], castor["loss"])
    floors = {v: judge(t["loss"], ref[v]["loss"]) for v in ref if v != "amp"}
    head = (f"{'step':>4} {'torch amp':>11} {'castor':>11} {'rel':>9} {'skipped t/c':>11} {'scale t/c':>15}"
            + "".join(f" {v:>10}" for v in floors))
    lines = [head]
    for i in range(a.steps):
        flag = lambda skipped: "yes" if skipped else "-"
        lines.append(f"{i + 1:4d} {t['loss'][i]:11.6f} {castor['loss'][i]:11.6f} {verdict['rel'][i]:9.2e} "
                     f"{flag(t['skipped'][i]):>5}/{flag(castor['skipped'][i]):<5} "
                     f"{t['loss_scale'][i]:>7g}/{castor['loss_scale'][i] or math.nan:<7g}"
                     + "".join(f" {ref[v]['loss'][i]:10.6f}" for v in floors)
                     + ("  > tol" if i < FIRST and not verdict["rel"][i] <= TOL else ""))
    table = "\n".join(lines)
    print(table)
    print(f"\nmean of {a.steps}: torch amp {verdict['mean_reference']:.6f}, castor {verdict['mean']:.6f}, "
          f"rel {verdict['mean_rel']:.2e} (<= {TOL})")
    print(f"first {FIRST}: max rel {verdict['first_max_rel']:.2e} (<= {TOL}), steps over: {verdict['first_steps_over_tol']}")
    for v, f in floors.items():
        print(f"  for scale, torch {v} vs torch amp: first {FIRST} max rel {f['first_max_rel']:.2e}, "
              f"mean rel {f['mean_rel']:.2e}, all-steps max rel {f['max_rel_all_steps']:.2e}")
    rates = [r for r in castor["img_per_s"][1:] if r]
    result = dict(
        criterion=f"each of the first {FIRST} losses within {TOL:.0%} relative of PyTorch AMP's, "
                  f"and the mean of {a.steps} within {TOL:.0%}",
        passed=verdict["passed"], castor_vs_torch_amp={k: v for k, v in verdict.items() if k != "rel"},
        torch_variants_vs_torch_amp={v: {k: x for k, x in f.items() if k != "rel"} for v, f in floors.items()},
        steps=[dict(step=i + 1, torch_amp=t["loss"][i], castor=castor["loss"][i], rel=verdict["rel"][i],
                    torch_skipped=t["skipped"][i], castor_skipped=castor["skipped"][i],
                    torch_loss_scale=t["loss_scale"][i], castor_loss_scale=castor["loss_scale"][i],
                    **{f"torch_{v}": ref[v]["loss"][i] for v in floors}) for i in range(a.steps)],
        setup=dict(plan=os.path.basename(a.plan), plan_sha256=sha256(a.plan), device=a.device,
                   batch=info["batch"], image_shape=info["image_shape"], classes=info["classes"],
                   adamw=info["adamw"], grad_scaler=info["grad_scaler"], label_smoothing=info["label_smoothing"],
                   model=a.model, amp_dtype=info["amp_dtype"],
                   weights=f"{a.model}, torch.manual_seed(0)", weights_sha256=sha256(weights),
                   model_tensors=loaded, data=dict(samples=count, label_classes=used.tolist(), signal=SIGNAL,
                                                   seed=DATA_SEED, images="float16"),
                   torch=torch.__version__, numpy=np.__version__,
                   cudnn=torch.backends.cudnn.version(), gpu=torch.cuda.get_device_name(0),
                   torch_seconds={v: round(r["seconds"], 1) for v, r in ref.items()},
                   castor_seconds=round(castor_s, 1),
                   castor_img_per_s_median=float(np.median(rates)) if rates else None))
    with open(a.out, "w") as f:
        json.dump(jsonable(result), f, indent=1)
    with open(os.path.splitext(a.out)[0] + ".txt", "w") as f:
        f.write(table + "\n")
    print(f"\n{'PASS' if verdict['passed'] else 'FAIL'}: {result['criterion']} -> {a.out}")
    return 0 if verdict["passed"] else 1


# ---------------------------------------------------------------------------------------------
# selftest (numpy + castor-run only)

def cmd_selftest(a):
    ok = True

    def check(cond, what):
        nonlocal ok
        ok &= bool(cond)
        print(f"{'ok  ' if cond else 'FAIL'} {what}")

    # the criterion on made-up losses
    ref = list(np.linspace(7.0, 2.0, STEPS))
    check(judge(ref, [x * 1.019 for x in ref])["passed"], "judge: 1.9% everywhere passes")
    check(not judge(ref, [x * 0.979 for x in ref])["passed"], "judge: 2.1% everywhere fails")
    check(not judge(ref, [x * (1.03 if i == 19 else 1.0) for i, x in enumerate(ref)])["passed"], "judge: step 20 at 3% fails")
    check(judge(ref, [x * (1.03 if i == 20 else 1.0) for i, x in enumerate(ref)])["passed"], "judge: step 21 at 3% passes")
    check(not judge(ref, [x * 1.0 for x in ref[:FIRST]] + [x * 1.1 for x in ref[FIRST:]])["passed"], "judge: mean 8% off fails")
    check(not judge(ref, ref[:-1])["passed"], "judge: a missing step fails")
    check(not judge(ref, [math.nan] + ref[1:])["passed"], "judge: a NaN loss fails")
    check(not judge(ref, ref[:50] + [math.inf] + ref[51:])["passed"], "judge: an infinite loss in the mean fails")

    # the writers against castor-run
    os.makedirs(a.work, exist_ok=True)
    info = plan_info(a.castor_run, a.plan)
    print(f"plan: batch {info['batch']}, images {info['image_shape']}, {info['classes']} classes, "
          f"{len(info['model_state'])} model tensors, AdamW {info['adamw']}, scaler {info['grad_scaler']}")
    inspect = json.loads(subprocess.run([a.castor_run, "inspect", a.plan, "--json"], capture_output=True,
                                        text=True, check=True).stdout)["plan"]
    ids = {q["name"]: q["tensor"] for q in inspect["parameters"]}
    shape_of = {t["id"]: [int(d) for d in t["shape"]] for t in inspect["tensors"]}
    rng = np.random.default_rng(1)
    weights = {}
    for n in info["model_state"]:
        s = shape_of[ids[n]]
        weights[n] = (rng.random(s, dtype=np.float32) + 0.5) if n.endswith("running_var") else \
            (rng.standard_normal(s, dtype=np.float32) * 0.1)
    wpath = os.path.join(a.work, "weights.safetensors")
    write_safetensors(wpath, weights)
    back = read_safetensors(wpath)
    check(all(back[k].tobytes() == v.tobytes() for k, v in weights.items()), "safetensors: reads back")
    count = 3 * info["batch"] + 1  # not a multiple of the batch: the wrap-around is exercised
    data_dir = os.path.join(a.work, "data")
    images, labels, used = make_data(data_dir, count, info["image_shape"], info["classes"])
    check(np.load(os.path.join(data_dir, "images.npy")).dtype == np.float16 and
          np.load(os.path.join(data_dir, "labels.npy")).dtype == np.int64, "npy: float16 images, int64 labels")
    n = check_loaded(a.castor_run, a.plan, "cpu", data_dir, wpath, a.work, info["model_state"])
    check(True, f"castor-run loaded all {n} model tensors bit-exactly")
    steps = a.steps
    records, _, _ = castor_train(a.castor_run, a.plan, "cpu", data_dir, wpath, steps, a.work, "selftest")
    losses = castor_losses(records)
    check(all(math.isfinite(x) for x in losses["loss"]), f"castor-run train: {steps} finite losses {losses['loss']}")
    scaled = info["grad_scaler"] is not None  # fp16 plans scale the loss, bf16 plans do not
    check((losses["loss_scale"][0] is not None) == scaled,
          f"castor-run reports the loss scale {losses['loss_scale']} (expected {'one' if scaled else 'none'}) "
          f"and skipped steps {losses['skipped']}")
    # batch order: castor-run infer on each step's batch gives that step's loss when the weights
    # do not move (lr 0), else only for the first step
    fixed = info["adamw"]["lr"] == 0
    for s in range(steps if fixed else 1):
        idx = batch_indices(s, info["batch"], count)
        prefix = os.path.join(a.work, f"batch{s}_")
        xi, yi, lo = prefix + "images.npy", prefix + "labels.npy", prefix + "loss.npy"
        np.save(xi, images[idx].astype(np.float32))
        np.save(yi, labels[idx])
        outs = [x for b in inspect["outputs"] for x in ("--output", f"{b['name']}={prefix}{b['name']}.npy")]
        subprocess.run([a.castor_run, "infer", a.plan, "--weights", wpath, "--input", f"images={xi}",
                        "--input", f"labels={yi}", *outs], check=True, capture_output=True)
        want = float(np.load(lo))
        check(abs(want - losses["loss"][s]) <= 1e-6 * abs(want),
              f"step {s + 1} (samples {idx.tolist()}): train loss {losses['loss'][s]:.9g} = infer {want:.9g}")
    if not fixed:
        print("(the plan's learning rate is not 0: the batch order was checked for step 1 only)")
    print("selftest " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["run", "selftest"])
    ap.add_argument("--plan", required=True, help="Castor fp16 or bf16 AdamW training plan (castor compile --train)")
    ap.add_argument("--model", default="resnet50",
                    help="run: the model the plan was compiled from: a torchvision.models.get_model name, or timm-NAME")
    ap.add_argument("--castor-run", required=True, help="castor-run binary")
    ap.add_argument("--work", required=True, help="scratch folder: weights, data, castor-run logs (~0.6 GB)")
    ap.add_argument("--out", help="run: result JSON (a .txt with the table is written beside it)")
    ap.add_argument("--device", default="cuda", help="run: castor-run's --device (default cuda)")
    ap.add_argument("--steps", type=int, default=None, help=f"steps (run: {STEPS}, selftest: 3)")
    ap.add_argument("--no-floor", action="store_true", help="run: only the PyTorch AMP reference, no variants")
    a = ap.parse_args()
    if a.command == "run":
        if not a.out:
            ap.error("run needs --out")
        a.steps = a.steps or STEPS
        if a.steps < FIRST:
            ap.error(f"--steps must be at least {FIRST}")
        sys.exit(cmd_run(a))
    a.steps = a.steps or 3
    sys.exit(cmd_selftest(a))


if __name__ == "__main__":
    main()
