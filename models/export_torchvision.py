#!/usr/bin/env python3
"""Export torchvision models to ONNX the way users do, and keep the graphs only.

Runs where torch + torchvision + onnx are installed (the GPU machine; the
export itself runs on the CPU).  For each model it writes

    <name>_train.onnx   torch.onnx.export(dynamo=False, opset 17,
                        training=TrainingMode.TRAINING, do_constant_folding=False)
    <name>_eval.onnx    the same with TrainingMode.EVAL, do_constant_folding=True

and, for resnet50, the default (dynamo) exporter on the model in eval mode:

    resnet50_dynamo.onnx        torch.onnx.export(model.eval(), (x,), f, dynamo=True)
    resnet50_dynamo_train.onnx  the same on model.train() (extra, for the record)

Models are built with weights=None (random init, nothing is downloaded).  The
weights are then stripped: every initializer becomes external data pointing at
`<file stem>.weights.bin`, which is deleted, so each fixture holds the graph
only (dims and data types of the initializers included).  Integer initializers
(<= 65536 elements: shapes, axes, index tables such as Swin's relative position
index) stay inline unless --strip-all is given, since they are graph structure
rather than weights.

For every file it prints a summary: op histogram, opsets, file size, inputs
and outputs, BatchNormalization attributes and whether its running-stat
outputs are used, and the distinct attribute values per op type.  The
summaries also go to <out>/summary.json.

Usage:
    python3 export_torchvision.py --out /tmp/fx
    python3 export_torchvision.py --out /tmp/fx --reference-dir /tmp/ref   # + resnet18 with weights
    python3 export_torchvision.py --strip-only model.onnx --out /tmp/x     # no torch needed
"""

import argparse
import collections
import json
import os
import shutil
import sys
import tempfile
import time
import traceback

import numpy as np
import onnx
from onnx import TensorProto, external_data_helper, numpy_helper

MODELS = ["resnet18", "resnet50", "resnet101", "resnext50_32x4d", "wide_resnet50_2",
          "vgg11_bn", "mobilenet_v2", "squeezenet1_0", "densenet121"]

KEEP_INLINE_MAX_ELEMS = 1 << 16
INTEGER_TYPES = {TensorProto.INT64, TensorProto.INT32, TensorProto.INT16, TensorProto.INT8,
                 TensorProto.UINT64, TensorProto.UINT32, TensorProto.UINT16,
                 TensorProto.UINT8, TensorProto.BOOL}


# ---------------------------------------------------------------------------
# Weight stripping and summaries (onnx only; testable without torch)
# ---------------------------------------------------------------------------

def _keep_inline(t, strip_all):
    if strip_all:
        return False
    n = int(np.prod(t.dims)) if len(t.dims) else 1
    return t.data_type in INTEGER_TYPES and n <= KEEP_INLINE_MAX_ELEMS


def strip_weights(src, dst, strip_all=False):
    """Load src (with its external data, if any), turn the initializers into
    external data in `<dst stem>.weights.bin`, save dst and delete the .bin."""
    model = onnx.load(src)  # loads external data from src's directory too
    dst_dir = os.path.dirname(os.path.abspath(dst))
    os.makedirs(dst_dir, exist_ok=True)
    location = os.path.splitext(os.path.basename(dst))[0] + ".weights.bin"
    kept = []
    for t in model.graph.initializer:
        # convert_model_to_external_data only moves tensors held in raw_data;
        # rewrite float_data/int64_data tensors as raw first.
        arr = numpy_helper.to_array(t)
        name = t.name
        t.CopyFrom(numpy_helper.from_array(arr, name))
        if _keep_inline(t, strip_all):
            kept.append(name)
    kept_set = set(kept)
    # Convert everything, then pull the kept ones back inline.
    saved = {t.name: onnx.TensorProto.FromString(t.SerializeToString())
             for t in model.graph.initializer if t.name in kept_set}
    external_data_helper.convert_model_to_external_data(
        model, all_tensors_to_one_file=True, location=location, size_threshold=0,
        convert_attribute=False)
    for t in model.graph.initializer:
        if t.name in kept_set:
            t.CopyFrom(saved[t.name])
    bin_path = os.path.join(dst_dir, location)
    if os.path.exists(bin_path):
        os.remove(bin_path)
    onnx.save_model(model, dst)  # writes the .bin and clears raw_data
    if os.path.exists(bin_path):
        os.remove(bin_path)
    # sanity: nothing heavy left in the file
    check = onnx.load(dst, load_external_data=False)
    for t in check.graph.initializer:
        if t.name not in kept_set and (t.data_location != TensorProto.EXTERNAL
                                       or len(t.raw_data)):
            raise RuntimeError("initializer %s still holds data" % t.name)
    return kept


def _attr_value(a):
    v = onnx.helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, list):
        return [x.decode() if isinstance(x, bytes) else x for x in v]
    if isinstance(v, onnx.TensorProto):
        arr = numpy_helper.to_array(v) if v.data_location != TensorProto.EXTERNAL else None
        if arr is not None and arr.size <= 8:
            return "tensor(%s)=%s" % (TensorProto.DataType.Name(v.data_type),
                                      arr.tolist())
        return "tensor(%s,%s)" % (TensorProto.DataType.Name(v.data_type), list(v.dims))
    if isinstance(v, onnx.GraphProto):
        return "graph(%d nodes)" % len(v.node)
    return v


def _shape(vi):
    t = vi.type.tensor_type
    dims = [d.dim_param if d.HasField("dim_param") else
            (d.dim_value if d.HasField("dim_value") else "?") for d in t.shape.dim]
    return "%s %s%s" % (vi.name, TensorProto.DataType.Name(t.elem_type), dims)


def _all_nodes(graph):
    for n in graph.node:
        yield n
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(a.g)
            for g in a.graphs:
                yield from _all_nodes(g)


def summarize(path):
    model = onnx.load(path, load_external_data=False)
    g = model.graph
    nodes = list(_all_nodes(g))
    for f in model.functions:
        nodes.extend(f.node)
    hist = collections.Counter(
        n.op_type if n.domain in ("", "ai.onnx") else "%s:%s" % (n.domain, n.op_type)
        for n in nodes)
    consumers = collections.Counter()
    for n in nodes:
        consumers.update(i for i in n.input if i)
    graph_outputs = {o.name for o in g.output}
    attrs = collections.defaultdict(set)
    for n in nodes:
        sig = tuple(sorted((a.name, json.dumps(_attr_value(a), default=str))
                           for a in n.attribute))
        attrs[n.op_type].add(sig)
    bn = [n for n in nodes if n.op_type == "BatchNormalization"]
    bn_info = None
    if bn:
        extra_used = sum(1 for n in bn for o in n.output[1:]
                         if o and (consumers[o] or o in graph_outputs))
        bn_info = {
            "count": len(bn),
            "outputs_per_node": sorted({len(n.output) for n in bn}),
            "running_stat_outputs_used": extra_used,
            "example_outputs": list(bn[0].output),
        }
    inits = list(g.initializer)
    n_ext = sum(1 for t in inits if t.data_location == TensorProto.EXTERNAL)
    s = {
        "file": os.path.basename(path),
        "bytes": os.path.getsize(path),
        "ir_version": model.ir_version,
        "opset_import": {(o.domain or "ai.onnx"): o.version for o in model.opset_import},
        "producer": "%s %s" % (model.producer_name, model.producer_version),
        "inputs": [_shape(v) for v in g.input],
        "outputs": [_shape(v) for v in g.output],
        "nodes": len(nodes),
        "op_histogram": dict(hist.most_common()),
        "functions": ["%s:%s" % (f.domain, f.name) for f in model.functions],
        "initializers": len(inits),
        "initializers_external": n_ext,
        "initializers_inline": [t.name for t in inits
                                if t.data_location != TensorProto.EXTERNAL],
        "initializer_names_sample": [t.name for t in inits[:6]],
        "value_info": len(g.value_info),
        "batchnorm": bn_info,
        "attributes": {op: [{k: json.loads(v) for k, v in sig} for sig in sorted(sigs)][:8]
                       for op, sigs in sorted(attrs.items())},
        "attribute_signatures": {op: len(sigs) for op, sigs in sorted(attrs.items())},
        "node_names_sample": [n.name for n in g.node[:4]] + [n.name for n in g.node[-2:]],
    }
    return s


def print_summary(s):
    hist = ", ".join("%s: %d" % kv for kv in s["op_histogram"].items())
    print("== %s  %d bytes  ir %d  opset %s  producer %s" % (
        s["file"], s["bytes"], s["ir_version"],
        ",".join("%s=%d" % kv for kv in s["opset_import"].items()), s["producer"]))
    print("   ops (%d): %s" % (s["nodes"], hist))
    print("   in: %s  out: %s" % ("; ".join(s["inputs"]), "; ".join(s["outputs"])))
    print("   initializers: %d (%d external, inline: %s)  value_info: %d  functions: %s" % (
        s["initializers"], s["initializers_external"], s["initializers_inline"][:10],
        s["value_info"], s["functions"]))
    print("   names: %s | inits: %s" % (s["node_names_sample"], s["initializer_names_sample"]))
    if s["batchnorm"]:
        print("   BN: %s" % json.dumps(s["batchnorm"]))
    for op, sigs in s["attributes"].items():
        if any(sigs):
            more = s["attribute_signatures"][op] - len(sigs)
            print("   attrs %s: %s%s" % (op, json.dumps(sigs), " (+%d more)" % more if more > 0 else ""))
    sys.stdout.flush()


# ---------------------------------------------------------------------------
# Exports (need torch)
# ---------------------------------------------------------------------------

def build(name):
    import torch
    import torch.onnx
    import torchvision
    torch.manual_seed(0)
    return torchvision.models.get_model(name, weights=None)


def export_legacy(model, path, mode):
    import torch
    import torch.onnx
    x = torch.randn(1, 3, 224, 224)
    training = (torch.onnx.TrainingMode.TRAINING if mode == "train"
                else torch.onnx.TrainingMode.EVAL)
    torch.onnx.export(model, (x,), path, dynamo=False, opset_version=17,
                      training=training, do_constant_folding=(mode == "eval"),
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})


def export_dynamo(model, path):
    import torch
    import torch.onnx
    x = torch.randn(1, 3, 224, 224)
    torch.onnx.export(model, (x,), path, dynamo=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="directory for the graph-only fixtures")
    p.add_argument("--reference-dir", default=None,
                   help="also keep resnet18_train with its weights (normal ONNX) here")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--no-dynamo", action="store_true")
    p.add_argument("--strip-all", action="store_true",
                   help="also move small integer initializers to external data")
    p.add_argument("--time-budget", type=float, default=420.0,
                   help="seconds; optional exports are skipped past this")
    p.add_argument("--strip-only", nargs="*", default=None, metavar="ONNX",
                   help="only strip and summarize these files (no torch)")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    summaries, failures = [], []

    def finish(src, name, exporter="given"):
        dst = os.path.join(args.out, name + ".onnx")
        strip_weights(src, dst, args.strip_all)
        s = summarize(dst)
        s["exporter"] = exporter
        print_summary(s)
        summaries.append(s)

    if args.strip_only is not None:
        for src in args.strip_only:
            finish(src, os.path.splitext(os.path.basename(src))[0])
        with open(os.path.join(args.out, "summary.json"), "w") as f:
            json.dump({"summaries": summaries}, f, indent=1)
        return 0

    import torch
    import torch.onnx
    import torchvision
    versions = {"torch": torch.__version__, "torchvision": torchvision.__version__,
                "onnx": onnx.__version__}
    for mod in ("onnxscript", "onnxruntime", "onnx_ir"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001
            versions[mod] = None
    print("versions: %s" % json.dumps(versions))
    torch.set_num_threads(max(1, min(16, os.cpu_count() or 1)))
    t0 = time.time()
    stage = tempfile.mkdtemp(prefix="tvexport_")

    def attempt(label, fn):
        t = time.time()
        try:
            fn()
            print("-- %s ok (%.1f s)" % (label, time.time() - t))
            return True
        except Exception as e:  # noqa: BLE001 -- report and go on
            msg = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0][:400]
                              if str(e).strip() else "")
            print("-- %s FAILED (%.1f s): %s" % (label, time.time() - t, msg))
            traceback.print_exc(limit=3)
            failures.append({"what": label, "error": msg})
            return False

    for name in args.models.split(","):
        for mode in ("train", "eval"):
            fx = "%s_%s" % (name, mode)
            work = os.path.join(stage, fx)
            os.makedirs(work, exist_ok=True)
            src = os.path.join(work, fx + ".onnx")

            def run(name=name, mode=mode, src=src):
                model = build(name)
                export_legacy(model, src, mode)
            how = "torchscript (dynamo=False), opset 17, training=%s, do_constant_folding=%s" % (
                "TRAINING" if mode == "train" else "EVAL", mode == "eval")
            if attempt("export %s" % fx, run):
                if name == "resnet18" and mode == "train" and args.reference_dir:
                    os.makedirs(args.reference_dir, exist_ok=True)
                    ref = os.path.join(args.reference_dir, "resnet18_train_full.onnx")
                    shutil.copyfile(src, ref)
                    print("-- reference with weights: %s (%d bytes)" % (
                        ref, os.path.getsize(ref)))
                attempt("strip %s" % fx, lambda src=src, fx=fx, how=how: finish(src, fx, how))
            elif time.time() - t0 < args.time_budget:
                # The TorchScript exporter failed (or is gone from this torch):
                # record what the default exporter makes of the same model.
                fx_d = fx + "_dynamo"
                src_d = os.path.join(work, fx_d + ".onnx")

                def run_d(name=name, mode=mode, src=src_d):
                    model = build(name)
                    export_dynamo(model.train() if mode == "train" else model.eval(), src)
                how_d = "dynamo=True (default options), model.%s() -- fallback" % mode
                if attempt("export %s (fallback)" % fx_d, run_d):
                    attempt("strip %s" % fx_d,
                            lambda src=src_d, fx=fx_d, how=how_d: finish(src, fx, how))
            shutil.rmtree(work, ignore_errors=True)

    if not args.no_dynamo:
        for fx, mode in (("resnet50_dynamo", "eval"), ("resnet50_dynamo_train", "train")):
            if mode == "train" and time.time() - t0 > args.time_budget:
                print("-- %s skipped: past the time budget" % fx)
                continue
            work = os.path.join(stage, fx)
            os.makedirs(work, exist_ok=True)
            src = os.path.join(work, fx + ".onnx")

            def run(mode=mode, src=src):
                model = build("resnet50")
                export_dynamo(model.eval() if mode == "eval" else model.train(), src)
            how = "dynamo=True (default options), model.%s()" % mode
            if attempt("export %s" % fx, run):
                print("   dynamo wrote: %s" % sorted(os.listdir(work)))
                attempt("strip %s" % fx, lambda src=src, fx=fx, how=how: finish(src, fx, how))
            shutil.rmtree(work, ignore_errors=True)

    shutil.rmtree(stage, ignore_errors=True)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump({"versions": versions, "summaries": summaries, "failures": failures,
                   "seconds": round(time.time() - t0, 1)}, f, indent=1)
    print("\n=== %d fixtures, %d failures, %.1f s" % (len(summaries), len(failures),
                                                      time.time() - t0))
    for s in summaries:
        print("%-32s %8d B  %s" % (s["file"], s["bytes"], ", ".join(
            "%s: %d" % kv for kv in s["op_histogram"].items())))
    for fl in failures:
        print("FAILED %s: %s" % (fl["what"], fl["error"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
