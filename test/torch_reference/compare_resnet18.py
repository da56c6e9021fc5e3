#!/usr/bin/env python3
"""ResNet-18 training steps: Castor (CPU reference backend) against PyTorch autograd.

torchvision's resnet18 (torch.manual_seed(0) weights) is exported to ONNX in training mode with
its weights inline; Castor compiles it into training steps and runs them from the weights file
`castor compile` writes beside each plan; PyTorch runs the same steps from the same weights on
the same batches. Three configurations, each compared tensor by tensor with the norm-wise
relative error |castor - torch| / |torch| (float64 arithmetic), all within --tol (1e-4):

  grad   one step: every parameter's gradient and the BN running statistics after it
  sgd    3 steps of torch.optim.SGD(lr 0.01, momentum 0.9, weight_decay 1e-4): parameters,
         momentum buffers, BN running statistics
  adamw  3 steps of torch.optim.AdamW(lr 1e-3, betas 0.9/0.999, eps 1e-8, weight_decay 0.01):
         parameters, exp_avg, exp_avg_sq, BN running statistics

The model is in train() mode (BN on batch statistics, momentum 0.1, unbiased running variance),
the loss F.cross_entropy (mean). The batch of step s (0-based) holds samples (s*B + b) mod M of
images.npy/labels.npy, as `castor-run train --data npy:DIR` feeds them. The gradients come from
a plan compiled with `--optimizer none --emit-gradients` (run by `castor-run infer`) when the
compiler accepts it, else from the momentum buffers of one SGD step with weight decay 0 (with
momentum, torch.optim.SGD's buffer after the first step is the gradient itself).

Besides the fp32 PyTorch run (the reference), the same steps are run in float64 PyTorch: each
row also shows Castor's and PyTorch fp32's distance to it, which tells whose rounding an
error is.

Subcommands (export and run need torch + torchvision + onnx; compile needs castor):

  export  --work DIR                    DIR/resnet18.onnx (weights inline) and DIR/export.json
  compile --work DIR --bin BUILD/bin    DIR/{grad,sgd,adamw}.plan, DIR/weights.safetensors,
                                        DIR/plans.json
  run     --work DIR --bin BIN [--out RESULTS_DIR]
                                        data, castor-run, PyTorch, comparison: results.json,
                                        table.txt; exit status 1 if any tensor is above --tol
  all     --work DIR --bin BUILD/bin    the three in a row (a machine with both)

castor-run needs no MLIR, so `run` works where only castor-run is built (or copied).
"""
import argparse
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import time

import numpy as np

BATCH = 2
STEPS = 3
SGD = dict(lr=0.01, momentum=0.9, weight_decay=1e-4)
ADAMW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
DATA_SEED = 1234

# Each configuration: castor compile options, steps, and the PyTorch optimizer that matches.
CONFIGS = {
    "grad": dict(steps=1, compile=["--optimizer", "sgd", "--lr", "0.01", "--momentum", "0.9",
                                   "--weight-decay", "0"],
                 torch=("sgd", dict(lr=0.01, momentum=0.9, weight_decay=0.0))),
    "sgd": dict(steps=STEPS, compile=["--optimizer", "sgd", "--lr", repr(SGD["lr"]), "--momentum",
                                      repr(SGD["momentum"]), "--weight-decay", repr(SGD["weight_decay"])],
                torch=("sgd", SGD)),
    "adamw": dict(steps=STEPS, compile=["--optimizer", "adamw", "--lr", repr(ADAMW["lr"]), "--beta1",
                                        repr(ADAMW["betas"][0]), "--beta2", repr(ADAMW["betas"][1]), "--eps",
                                        repr(ADAMW["eps"]), "--weight-decay", repr(ADAMW["weight_decay"])],
                  torch=("adamw", ADAMW)),
}
EMIT_GRADIENTS = ["--optimizer", "none", "--emit-gradients"]


# ---------------------------------------------------------------------------------------------
# safetensors (8-byte little-endian header length, JSON header, raw little-endian data)

_DTYPES = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I64": "<i8", "I32": "<i4"}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (length,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + length].decode())
    meta = header.pop("__metadata__", {})
    base = 8 + length
    tensors = {}
    for name, h in header.items():
        begin, end = h["data_offsets"]
        raw = blob[base + begin:base + end]
        if h["dtype"] == "BF16":
            array = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            array = np.frombuffer(raw, _DTYPES[h["dtype"]])
        tensors[name] = array.reshape(h["shape"]).copy()
    return tensors, meta


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tensor_digest(tensors):
    """One hash over names, dtypes, shapes and bytes, independent of the file layout."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        h.update(f"{name}|{a.dtype.str}|{list(a.shape)}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------
# export (torch)

def build_model(num_classes):
    import torch
    import torchvision
    torch.manual_seed(0)
    return torchvision.models.resnet18(weights=None, num_classes=num_classes)


def cmd_export(a):
    import onnx
    import torch
    import torchvision
    from onnx import numpy_helper
    os.makedirs(a.work, exist_ok=True)
    model = build_model(a.num_classes)
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    x = torch.randn(BATCH, 3, a.image_size, a.image_size)
    path = os.path.join(a.work, "resnet18.onnx")
    torch.onnx.export(model, (x,), path, dynamo=False, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    m = onnx.load(path)
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    # The trace runs the model once in train mode; record whether that touched what was exported.
    differs = sorted(k for k, v in inits.items() if k in initial and not np.array_equal(v, initial[k].numpy()))
    missing = sorted(k for k in initial if k not in inits)
    info = {
        "file": "resnet18.onnx", "sha256": sha256(path), "bytes": os.path.getsize(path),
        "image_size": a.image_size, "num_classes": a.num_classes, "batch_example": BATCH,
        "torch": torch.__version__, "torchvision": torchvision.__version__, "onnx": onnx.__version__,
        "numpy": np.__version__, "initializers": len(inits),
        "initializers_differing_from_seed0_state_dict": differs,
        "state_dict_entries_not_exported": missing,
        "ops": sorted({n.op_type for n in m.graph.node}),
    }
    with open(os.path.join(a.work, "export.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(json.dumps({k: v for k, v in info.items() if k != "ops"}))


# ---------------------------------------------------------------------------------------------
# compile (castor)

def to_float64(src, dst):
    """The same ONNX graph and weights in float64 (the float32 values widened exactly)."""
    import onnx
    from onnx import TensorProto, numpy_helper
    m = onnx.load(src)
    for i, init in enumerate(m.graph.initializer):
        value = numpy_helper.to_array(init)
        if value.dtype == np.float32:
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(value.astype(np.float64), init.name))
    for v in list(m.graph.input) + list(m.graph.output):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.DOUBLE
    onnx.save(m, dst)


def cmd_compile(a):
    model = os.path.join(a.work, "resnet18.onnx")
    model64 = os.path.join(a.work, "resnet18_f64.onnx")
    castor = os.path.join(a.bin, "castor")
    plans = {"castor_compile": [], "grad_source": None}
    digests = {}

    def compile_plan(name, options, source=model):
        plan = os.path.join(a.work, name + ".plan")
        cmd = [castor, "compile", source, "--train", "--batch", str(BATCH), *options, "-o", plan]
        r = subprocess.run(cmd, capture_output=True, text=True)
        plans["castor_compile"].append({"plan": name, "args": cmd[2:], "rc": r.returncode,
                                        "stderr": r.stderr.strip()[-2000:]})
        if r.returncode != 0:
            return None
        weights = os.path.join(a.work, name + ".weights.safetensors")
        tensors, _ = read_safetensors(weights)
        # The float64 plans' weights must be the float32 ones, widened.
        digests[name] = tensor_digest({k: v.astype(np.float32) for k, v in tensors.items()})
        return weights

    to_float64(model, model64)
    weights = None
    for name, cfg in CONFIGS.items():
        options = cfg["compile"]
        if name == "grad":
            w = compile_plan("grad", EMIT_GRADIENTS)
            if w:
                plans["grad_source"] = "emit-gradients"
            else:
                print("castor compile --optimizer none --emit-gradients failed:\n  "
                      + plans["castor_compile"][-1]["stderr"].replace("\n", "\n  ")
                      + "\n  (gradients from the momentum buffers of one SGD step instead)", file=sys.stderr)
                w = compile_plan("grad", options)
                plans["grad_source"] = "momentum-buffer"
            options = EMIT_GRADIENTS if plans["grad_source"] == "emit-gradients" else options
        else:
            w = compile_plan(name, options)
        if not w:
            sys.exit(f"castor compile failed for {name}:\n{plans['castor_compile'][-1]['stderr']}")
        if weights is None:
            weights = w
        # The float64 twin: Castor's arithmetic without float32 rounding, for the float64 check.
        if not compile_plan(name + "64", options, model64):
            sys.exit(f"castor compile failed for {name}64:\n{plans['castor_compile'][-1]['stderr']}")
    if len(set(digests.values())) != 1:
        sys.exit(f"the plans' weights files differ: {digests}")
    # One copy of the weights is enough: every plan reads the same initializers (castor-run
    # widens them for the float64 plans).
    shutil.move(weights, os.path.join(a.work, "weights.safetensors"))
    for name in CONFIGS:
        for suffix in ("", "64"):
            w = os.path.join(a.work, name + suffix + ".weights.safetensors")
            if os.path.exists(w):
                os.remove(w)
    os.remove(model64)
    plans["weights_digest"] = next(iter(digests.values()))
    plans["model_sha256"] = sha256(model)
    with open(os.path.join(a.work, "plans.json"), "w") as f:
        json.dump(plans, f, indent=1)
    print(f"compiled {', '.join(CONFIGS)} and their float64 twins (gradients: {plans['grad_source']}) into {a.work}")


# ---------------------------------------------------------------------------------------------
# run: data, castor-run, PyTorch, comparison

# Castor runs of each configuration: the float32 plan (the one compared with PyTorch fp32), its
# float64 twin (compared with PyTorch fp64: the same arithmetic without rounding, so any
# difference in semantics shows far above rounding), and the float32 plan started from weights
# one ulp away (how far rounding alone moves the result: the floor for any float32 comparison).
VARIANTS = ("f32", "f64", "ulp")


def write_safetensors(path, tensors):
    names = {np.dtype("<f4"): "F32", np.dtype("<f8"): "F64", np.dtype("<i8"): "I64"}
    header, offset, blobs = {}, 0, []
    for name, value in tensors.items():
        data = np.ascontiguousarray(value).tobytes()
        header[name] = {"dtype": names[value.dtype.newbyteorder("<")], "shape": list(value.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def one_ulp_away(tensors, seed=7):
    """Every float32 value moved to a neighbouring float32, up or down at random."""
    rng = np.random.default_rng(seed)
    out = {}
    for k, v in tensors.items():
        if v.dtype == np.float32:
            direction = np.where(rng.random(v.shape) < 0.5, np.inf, -np.inf).astype(np.float32)
            out[k] = np.nextafter(v, direction)
        else:
            out[k] = v
    return out


def make_data(directory, count, image_shape, classes):
    rng = np.random.default_rng(DATA_SEED)
    images = rng.standard_normal((count, *image_shape)).astype(np.float32)
    labels = rng.integers(0, classes, size=count, dtype=np.int64)
    os.makedirs(directory, exist_ok=True)
    np.save(os.path.join(directory, "images.npy"), images)
    np.save(os.path.join(directory, "labels.npy"), labels)
    return images, labels


def batch_of(images, labels, step):
    idx = [(step * BATCH + b) % len(images) for b in range(BATCH)]
    return images[idx], labels[idx]


def start_castor(a, name, variant, cfg, plans, trainable, scratch):
    """Starts castor-run for one configuration and variant; returns (process, command)."""
    run = os.path.join(a.bin, "castor-run")
    plan = os.path.join(a.work, name + ("64" if variant == "f64" else "") + ".plan")
    weights = os.path.join(scratch, "perturbed.safetensors") if variant == "ulp" else \
        os.path.join(a.work, "weights.safetensors")
    tag = f"{name}_{variant}"
    log = open(os.path.join(scratch, f"castor_{tag}.log"), "w")
    if name == "grad" and plans["grad_source"] == "emit-gradients":
        gdir = os.path.join(scratch, f"castor_{tag}")
        os.makedirs(gdir, exist_ok=True)
        images, labels = os.path.join(scratch, "batch0_images.npy"), os.path.join(scratch, "batch0_labels.npy")
        cmd = [run, "infer", plan, "--weights", weights, "--input", f"images={images}",
               "--input", f"labels={labels}", "--output", f"loss={gdir}/loss.npy",
               "--output", f"correct={gdir}/correct.npy"]
        for p in trainable:
            cmd += ["--output", f"grad:{p}={gdir}/{p}.npy"]
    else:
        cmd = [run, "train", plan, "--steps", str(cfg["steps"]), "--data", "npy:" + os.path.join(scratch, "data"),
               "--weights", weights, "--save", os.path.join(scratch, f"castor_{tag}.safetensors"),
               "--log-json", os.path.join(scratch, f"castor_{tag}.jsonl")]
    log.write(" ".join(cmd) + "\n")
    log.flush()
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), cmd


def collect_castor(name, variant, plans, trainable, scratch):
    """Castor's tensors of one run, named as the comparison names them."""
    tag = f"{name}_{variant}"
    result = {}
    if name == "grad" and plans["grad_source"] == "emit-gradients":
        gdir = os.path.join(scratch, f"castor_{tag}")
        for p in trainable:
            result["grad:" + p] = np.load(os.path.join(gdir, p + ".npy"))
        return result, [float(np.load(os.path.join(gdir, "loss.npy")))], {}
    state, _ = read_safetensors(os.path.join(scratch, f"castor_{tag}.safetensors"))
    with open(os.path.join(scratch, f"castor_{tag}.jsonl")) as f:
        losses = [json.loads(line)["loss"] for line in f if line.strip()]
    for k, v in state.items():
        if name == "grad":
            if k.endswith(".momentum_buffer"):
                result["grad:" + k[:-len(".momentum_buffer")]] = v
            elif k.endswith("running_mean") or k.endswith("running_var"):
                result[k] = v
        elif not k.startswith("castor."):
            result[k] = v
    counters = {k: int(v) for k, v in state.items() if k in ("castor.iteration", "castor.optimizer_step")}
    return result, losses, counters


def torch_reference(initial, images, labels, num_classes, kind, hyper, steps, dtype, threads):
    """PyTorch's tensors after `steps` steps, named as Castor's state file names them."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(threads)
    model = build_model(num_classes)
    sd = model.state_dict()
    for k in sd:
        if k.endswith("num_batches_tracked"):
            continue
        sd[k].copy_(torch.from_numpy(np.array(initial[k])))
    model = model.to(dtype).train()
    params = list(model.parameters())
    names = {id(p): n for n, p in model.named_parameters()}
    if kind == "sgd":
        opt = torch.optim.SGD(params, **hyper)
    else:
        opt = torch.optim.AdamW(params, **hyper)
    losses, grads = [], {}
    for s in range(steps):
        x, y = batch_of(images, labels, s)
        x = torch.from_numpy(x).to(dtype)
        y = torch.from_numpy(y)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        if s == 0:
            grads = {"grad:" + n: p.grad.detach().double().numpy().copy() for n, p in model.named_parameters()}
        opt.step()
        losses.append(float(loss.detach()))
    out = {k: v.detach().double().numpy().copy() for k, v in model.state_dict().items()
           if not k.endswith("num_batches_tracked")}
    for p in params:
        st = opt.state[p]
        for buf in ("momentum_buffer", "exp_avg", "exp_avg_sq"):
            if buf in st and st[buf] is not None:
                out[f"{names[id(p)]}.{buf}"] = st[buf].detach().double().numpy().copy()
    out.update(grads)
    return out, losses


def rel(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    den = np.linalg.norm(b)
    num = np.linalg.norm(a - b)
    return float(num / den) if den > 0 else (0.0 if num == 0 else float("inf"))


# Columns of the comparison: (key, castor-or-torch side, reference side, heading)
COLUMNS = [("rel", "castor32", "torch32", "castor32-torch32"),
           ("rel_c32_t64", "castor32", "torch64", "castor32-torch64"),
           ("rel_t32_t64", "torch32", "torch64", "torch32-torch64"),
           ("rel_c64_t64", "castor64", "torch64", "castor64-torch64"),
           ("rel_ulp", "castor32ulp", "castor32", "castor32ulp-castor32")]


def cmd_run(a):
    import torch
    import torchvision
    out = a.out or os.path.join(a.work, "results")
    os.makedirs(out, exist_ok=True)
    scratch = os.path.join(a.work, "run")  # data and training states (large): not in `out`
    os.makedirs(scratch, exist_ok=True)
    with open(os.path.join(a.work, "plans.json")) as f:
        plans = json.load(f)
    initial, _ = read_safetensors(os.path.join(a.work, "weights.safetensors"))
    if tensor_digest(initial) != plans["weights_digest"]:
        sys.exit("weights.safetensors is not the file castor compile wrote")
    write_safetensors(os.path.join(scratch, "perturbed.safetensors"), one_ulp_away(initial))

    # The torch model must hold exactly the tensors of the weights file.
    model = build_model(a.num_classes)
    sd = model.state_dict()
    expected = {k for k in sd if not k.endswith("num_batches_tracked")}
    in_file = {k for k in initial if not k.startswith("castor.")}
    if expected != in_file:
        sys.exit(f"weights file and resnet18 state_dict disagree: only in file {sorted(in_file - expected)}, "
                 f"only in state_dict {sorted(expected - in_file)}")
    for k in expected:
        if tuple(sd[k].shape) != initial[k].shape or initial[k].dtype != np.float32:
            sys.exit(f"{k}: file {initial[k].dtype}{list(initial[k].shape)}, torch {list(sd[k].shape)}")
    seed0_equal = all(np.array_equal(sd[k].numpy(), initial[k]) for k in expected)
    trainable = [n for n, _ in model.named_parameters()]
    image_size = a.image_size
    images, labels = make_data(os.path.join(scratch, "data"), BATCH * STEPS, (3, image_size, image_size),
                               a.num_classes)
    x0, y0 = batch_of(images, labels, 0)
    np.save(os.path.join(scratch, "batch0_images.npy"), x0)
    np.save(os.path.join(scratch, "batch0_labels.npy"), y0)

    # Castor's runs in parallel (single-threaded each), PyTorch beside them.
    t0 = time.time()
    procs = {(name, v): start_castor(a, name, v, cfg, plans, trainable, scratch)
             for name, cfg in CONFIGS.items() for v in VARIANTS}
    threads = max(1, (os.cpu_count() or 4) - len(procs))
    ref = {}
    for name, cfg in CONFIGS.items():
        kind, hyper = cfg["torch"]
        for dtype in (torch.float32, torch.float64):
            t = time.time()
            ref[(name, dtype)] = torch_reference(initial, images, labels, a.num_classes, kind, hyper, cfg["steps"],
                                                 dtype, threads)
            print(f"torch {name} {str(dtype)[6:]}: {time.time() - t:.1f} s, losses "
                  f"{[round(l, 6) for l in ref[(name, dtype)][1]]}", flush=True)
    failed = []
    for (name, v), (p, cmd) in procs.items():
        rc = p.wait()
        if rc != 0:
            failed.append(f"{name}_{v}")
            print(f"castor-run for {name} ({v}) failed ({rc}): {' '.join(cmd)}", file=sys.stderr)
            with open(os.path.join(scratch, f"castor_{name}_{v}.log")) as f:
                print(f.read()[-3000:], file=sys.stderr)
    castor_seconds = time.time() - t0
    for name, v in procs:
        shutil.copy(os.path.join(scratch, f"castor_{name}_{v}.log"), out)
    if failed:
        sys.exit(1)

    rows, summary = [], {}
    for name, cfg in CONFIGS.items():
        side = {}
        for v, key in (("f32", "castor32"), ("f64", "castor64"), ("ulp", "castor32ulp")):
            side[key] = collect_castor(name, v, plans, trainable, scratch)
        side["torch32"] = ref[(name, torch.float32)] + ({},)
        side["torch64"] = ref[(name, torch.float64)] + ({},)
        c, closses, counters = side["castor32"]
        t32, l32 = ref[(name, torch.float32)]
        wanted = [k for k in t32 if (k.startswith("grad:") if name == "grad" else not k.startswith("grad:"))]
        if name == "grad" and plans["grad_source"] == "momentum-buffer":
            wanted += [k for k in t32 if k.endswith("running_mean") or k.endswith("running_var")]
        missing = sorted({k for k in wanted for s in ("castor32", "castor64", "castor32ulp") if k not in side[s][0]})
        extra = sorted(set(c) - set(wanted))
        cfg_rows = []
        for k in wanted:
            if k in missing:
                continue
            row = dict(config=name, tensor=k, shape=list(t32[k].shape), norm=float(np.linalg.norm(t32[k])))
            for key, x, y, _ in COLUMNS:
                u, w = side[x][0][k], side[y][0][k]
                row[key] = rel(u, w) if u.shape == w.shape else float("inf")
            cfg_rows.append(row)
        loss_rows = []
        for i in range(len(l32)):
            entry = {"step": i + 1}
            for key in ("castor32", "torch32", "torch64", "castor64", "castor32ulp"):
                entry[key] = side[key][1][i] if i < len(side[key][1]) else None
            entry["rel"] = abs(entry["castor32"] - entry["torch32"]) / abs(entry["torch32"])
            entry["rel_c64_t64"] = abs(entry["castor64"] - entry["torch64"]) / abs(entry["torch64"])
            loss_rows.append(entry)
        counter_ok = all(v == cfg["steps"] for s in ("castor32", "castor64") for v in side[s][2].values())
        verdicts = {}
        for key, _, _, _ in COLUMNS:
            worst = max(cfg_rows, key=lambda r: r[key])
            verdicts[key] = dict(max=worst[key], tensor=worst["tensor"],
                                 over=[r["tensor"] for r in cfg_rows if not r[key] <= a.tol])
        ok32 = (not verdicts["rel"]["over"] and all(l["rel"] <= a.tol for l in loss_rows))
        ok64 = (not verdicts["rel_c64_t64"]["over"] and all(l["rel_c64_t64"] <= a.tol for l in loss_rows))
        complete = not missing and counter_ok and all(len(side[s][1]) == len(l32) for s in side)
        summary[name] = dict(tensors=len(cfg_rows), columns=verdicts, losses=loss_rows, missing=missing,
                             unexpected=extra, counters=counters, counters_ok=counter_ok,
                             passed_fp32=ok32 and complete, passed_fp64=ok64 and complete)
        rows += cfg_rows

    lines = [f"{'config':6} {'tensor':46} {'shape':>18}" + "".join(f" {h:>20}" for _, _, _, h in COLUMNS)]
    for r in rows:
        flag = "" if r["rel"] <= a.tol else "  > tol (castor32-torch32)"
        lines.append(f"{r['config']:6} {r['tensor']:46} {str(r['shape']):>18}"
                     + "".join(f" {r[key]:20.3e}" for key, _, _, _ in COLUMNS) + flag)
    table = "\n".join(lines)
    with open(os.path.join(out, "table.txt"), "w") as f:
        f.write(table + "\n")
    print(table)
    print()
    for name, s in summary.items():
        cols = s["columns"]
        print(f"{name:6} {s['tensors']:4} tensors, max norm-wise relative error (count above {a.tol:g}):")
        for key, _, _, heading in COLUMNS:
            print(f"         {heading:22} {cols[key]['max']:.3e} ({len(cols[key]['over'])})  {cols[key]['tensor']}")
        print("         losses " + "; ".join(
            f"step {l['step']}: castor32 {l['castor32']:.8g} torch32 {l['torch32']:.8g} torch64 {l['torch64']:.10g}"
            f" castor64 {l['castor64']:.10g}" for l in s["losses"]))
        print(f"         counters {s['counters']}  fp32 {'PASS' if s['passed_fp32'] else 'FAIL'}"
              f"  fp64 {'PASS' if s['passed_fp64'] else 'FAIL'}")
        if s["missing"] or s["unexpected"]:
            print(f"         missing {s['missing']}, unexpected {s['unexpected']}")
    passed32 = all(s["passed_fp32"] for s in summary.values())
    passed64 = all(s["passed_fp64"] for s in summary.values())
    passed = passed32 if a.judge == "fp32" else passed64
    result = dict(passed=passed, judge=a.judge, passed_fp32=passed32, passed_fp64=passed64, tolerance=a.tol,
                  batch=BATCH, steps=STEPS, image_size=image_size, num_classes=a.num_classes,
                  grad_source=plans["grad_source"], sgd=SGD, adamw=dict(ADAMW, betas=list(ADAMW["betas"])),
                  data_seed=DATA_SEED, torch=torch.__version__, torchvision=torchvision.__version__,
                  numpy=np.__version__, weights_equal_seed0_state_dict=seed0_equal,
                  castor_wall_s=round(castor_seconds, 1), columns={k: h for k, _, _, h in COLUMNS},
                  summary=summary, rows=rows, castor_compile=plans["castor_compile"])
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"\nResNet-18 {image_size}x{image_size} batch {BATCH}, tolerance {a.tol:g}:")
    print(f"  fp32 (castor32 vs torch32): {'PASS' if passed32 else 'FAIL'}, "
          + ", ".join(f"{n} max {s['columns']['rel']['max']:.2e}" for n, s in summary.items()))
    print(f"  fp64 (castor64 vs torch64): {'PASS' if passed64 else 'FAIL'}, "
          + ", ".join(f"{n} max {s['columns']['rel_c64_t64']['max']:.2e}" for n, s in summary.items()))
    print(f"  float32 floor (castor32 one ulp apart): "
          + ", ".join(f"{n} max {s['columns']['rel_ulp']['max']:.2e}" for n, s in summary.items()))
    print(f"{'PASS' if passed else 'FAIL'} (judged by {a.judge})")
    return 0 if passed else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["export", "compile", "run", "all"])
    ap.add_argument("--work", required=True, help="folder of the model, plans and weights")
    ap.add_argument("--bin", help="folder with castor (compile) and castor-run (run)")
    ap.add_argument("--out", help="results folder (run; default WORK/results)")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--num-classes", type=int, default=1000)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--judge", choices=["fp32", "fp64"], default="fp32",
                    help="exit status from castor fp32 vs torch fp32 (default) or castor fp64 vs torch fp64")
    a = ap.parse_args()
    if a.command in ("compile", "run", "all") and not a.bin:
        ap.error("--bin is needed")
    if a.command in ("run", "all"):
        info = os.path.join(a.work, "export.json")
        if os.path.exists(info):
            with open(info) as f:
                e = json.load(f)
            a.image_size, a.num_classes = e["image_size"], e["num_classes"]
    if a.command in ("export", "all"):
        cmd_export(a)
    if a.command in ("compile", "all"):
        cmd_compile(a)
    if a.command in ("run", "all"):
        sys.exit(cmd_run(a))


if __name__ == "__main__":
    main()
