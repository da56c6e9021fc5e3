#!/usr/bin/env python3
"""ONNX backend node tests for the operators Castor imports.

Finds every node test shipped with the `onnx` Python package whose model consists only of
operators Castor supports (by the op types in model.onnx, not by the directory name) and checks
it against the allow-list:

    pass TEST_NAME
    exclude TEST_NAME  # reason (mandatory)

Every such test must be listed, and every listed test must exist. Each `pass` test is compiled
with `castor compile` (no --batch: static input dimensions stay as declared), run with
`castor-run infer` on each of its data sets, and every graph output is compared with the expected
one (np.testing.assert_allclose, rtol 1e-4, atol 1e-5; equal shapes; float vs integer kinds).

Usage: run_node_tests.py --bin BUILD/bin --allow-list allow_list.txt --work DIR
                         [--data NODE_DIR] [--jobs 2] [--only NAME ...] [--all]

--all also runs the excluded tests and reports how each one fares (no effect on the exit status).
The exit status is non-zero when the allow-list is inconsistent with the tests or when a `pass`
test fails.
"""
import argparse
import concurrent.futures
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper

def importer_ops():
    """The ONNX ops the importer converts: its converter table (NodeConverters.cpp's registry()),
    read from the source so that an op added there is tested here without being named twice."""
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "frontends", "onnx", "lib",
                          "NodeConverters.cpp")
    table = re.search(r"registry\(\) \{(.*?)\n\}", open(source).read(), re.S)
    if not table:
        sys.exit(f"no converter table (registry()) in {source}")
    return set(re.findall(r'\{"(\w+)", convert', table.group(1)))


# ScatterND is folded at import when its operands are constants, as the node tests' are.
SUPPORTED_OPS = importer_ops() | {"ScatterND"}
RTOL = 1e-4
ATOL = 1e-5
COMMAND_TIMEOUT_S = 120


def default_data_dir():
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")


def op_types(model_path):
    """The (domain, op type) of every node of the main graph."""
    model = onnx.load(model_path, load_external_data=False)
    return [(n.domain or "ai.onnx", n.op_type) for n in model.graph.node]


def discover(data_dir):
    """Names of the node tests whose every node is a supported default-domain op."""
    found = []
    for name in sorted(os.listdir(data_dir)):
        model = os.path.join(data_dir, name, "model.onnx")
        if not name.startswith("test_") or not os.path.isfile(model):
            continue
        ops = op_types(model)
        if ops and all(domain == "ai.onnx" and op in SUPPORTED_OPS for domain, op in ops):
            found.append(name)
    return found


LINE_RE = re.compile(r"^(pass|exclude)\s+(\S+)\s*(?:#\s*(.*))?$")


def read_allow_list(path):
    """{name: (action, reason)} and a list of format errors."""
    entries, errors = {}, []
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            where = f"{path}:{number}"
            m = LINE_RE.match(line)
            if not m:
                errors.append(f"{where}: expected 'pass NAME' or 'exclude NAME  # reason': {line!r}")
                continue
            action, name, reason = m.group(1), m.group(2), (m.group(3) or "").strip()
            if action == "exclude" and not reason:
                errors.append(f"{where}: exclusion of {name} gives no reason ('exclude NAME  # reason')")
            if action == "pass" and m.group(3) is not None:
                errors.append(f"{where}: a 'pass' entry takes no comment: {line!r}")
            if name in entries:
                errors.append(f"{where}: {name} is listed twice")
            entries[name] = (action, reason)
    return entries, errors


def check_allow_list(entries, supported, data_dir):
    errors = []
    for name in supported:
        if name not in entries:
            errors.append(f"{name}: uses only supported ops but is not in the allow-list "
                          "(add 'pass {0}' or 'exclude {0}  # reason')".format(name))
    supported_set = set(supported)
    for name in sorted(entries):
        if name in supported_set:
            continue
        if not os.path.isfile(os.path.join(data_dir, name, "model.onnx")):
            errors.append(f"{name}: listed in the allow-list but there is no such node test")
        else:
            errors.append(f"{name}: listed in the allow-list but uses ops Castor does not support")
    return errors


class TestFailure(Exception):
    pass


def tensor_to_numpy(path, declared_type):
    """The array in a TensorProto file; `declared_type` is the graph's element type for it."""
    tensor = onnx.TensorProto()
    with open(path, "rb") as f:
        tensor.ParseFromString(f.read())
    array = numpy_helper.to_array(tensor)
    bfloat16 = onnx.TensorProto.BFLOAT16
    if tensor.data_type == bfloat16 or (declared_type == bfloat16 and array.dtype == np.uint16):
        # bfloat16 data comes as its raw bits (some files even declare them UINT16); it widens
        # exactly to float32, which is also how castor-run writes bf16 outputs (.npy has no bf16).
        return (array.astype(np.uint32) << 16).view(np.float32)
    return array


def run_command(cmd, what, cwd):
    try:
        r = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise TestFailure(f"{what} timed out after {COMMAND_TIMEOUT_S} s: {' '.join(cmd)}")
    if r.returncode != 0:
        out = r.stdout.strip()
        if len(out) > 2000:
            out = out[:2000] + " ..."
        status = f"signal {-r.returncode}" if r.returncode < 0 else f"exit {r.returncode}"
        raise TestFailure(f"{what} failed ({status}): {' '.join(cmd)}\n{out}")
    return r.stdout


def dtype_kind(a):
    if a.dtype.kind == "f":
        return "float"
    if a.dtype.kind in "iu":
        return "integer"
    return a.dtype.kind


def run_test(name, data_dir, bin_dir, work_root):
    """Returns (name, ok, message)."""
    test_dir = os.path.join(data_dir, name)
    work = os.path.join(work_root, name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    try:
        model = onnx.load(os.path.join(test_dir, "model.onnx"), load_external_data=False)
        initializers = {t.name for t in model.graph.initializer}
        graph_inputs = [i.name for i in model.graph.input if i.name not in initializers]
        graph_outputs = [o.name for o in model.graph.output]
        declared = {v.name: v.type.tensor_type.elem_type for v in list(model.graph.input) + list(model.graph.output)
                    if v.type.HasField("tensor_type")}

        plan = os.path.join(work, "model.plan")
        run_command([os.path.join(bin_dir, "castor"), "compile", os.path.join(test_dir, "model.onnx"), "-o", plan],
                    "castor compile", work)
        info = json.loads(run_command([os.path.join(bin_dir, "castor-run"), "inspect", "--json", plan],
                                      "castor-run inspect", work))
        plan_inputs = [b["name"] for b in info["plan"].get("inputs", [])]
        plan_outputs = [b["name"] for b in info["plan"].get("outputs", [])]
        missing = [o for o in graph_outputs if o not in plan_outputs]
        if missing:
            raise TestFailure(f"the plan lacks graph output(s) {missing} (plan outputs: {plan_outputs})")
        unknown = [i for i in plan_inputs if i not in graph_inputs]
        if unknown:
            raise TestFailure(f"the plan has input(s) {unknown} that are not graph inputs {graph_inputs}")
        weights = os.path.join(work, "model.weights.safetensors")

        data_sets = sorted(glob.glob(os.path.join(test_dir, "test_data_set_*")))
        if not data_sets:
            raise TestFailure("no test_data_set_* directories")
        for data_set in data_sets:
            ds = os.path.basename(data_set)
            ds_work = os.path.join(work, ds)
            os.makedirs(ds_work)
            input_files = sorted(glob.glob(os.path.join(data_set, "input_*.pb")),
                                 key=lambda p: int(re.search(r"input_(\d+)\.pb$", p).group(1)))
            output_files = sorted(glob.glob(os.path.join(data_set, "output_*.pb")),
                                  key=lambda p: int(re.search(r"output_(\d+)\.pb$", p).group(1)))
            if len(input_files) != len(graph_inputs) or len(output_files) != len(graph_outputs):
                raise TestFailure(f"{ds}: {len(input_files)} inputs / {len(output_files)} outputs for graph "
                                  f"inputs {graph_inputs} and outputs {graph_outputs}")
            cmd = [os.path.join(bin_dir, "castor-run"), "infer", plan]
            for position, path in enumerate(input_files):
                # Data files follow the order of the graph's (non-initializer) inputs.
                input_name = graph_inputs[position]
                value = tensor_to_numpy(path, declared.get(input_name))
                if input_name not in plan_inputs:
                    continue  # folded away by the compiler; the outputs show whether that was right
                npy = os.path.join(ds_work, f"input_{position}.npy")
                np.save(npy, value)
                cmd += ["--input", f"{input_name}={npy}"]
            produced = {}
            for position, output_name in enumerate(graph_outputs):
                produced[output_name] = os.path.join(ds_work, f"output_{position}.npy")
                cmd += ["--output", f"{output_name}={produced[output_name]}"]
            if os.path.exists(weights):
                cmd += ["--weights", weights]
            run_command(cmd, f"{ds}: castor-run infer", work)

            for position, path in enumerate(output_files):
                output_name = graph_outputs[position]
                expected = tensor_to_numpy(path, declared.get(output_name))
                actual = np.load(produced[output_name])
                where = f"{ds}: output '{output_name}'"
                if actual.shape != expected.shape:
                    raise TestFailure(f"{where}: shape {actual.shape}, expected {expected.shape}")
                if dtype_kind(actual) != dtype_kind(expected):
                    raise TestFailure(f"{where}: dtype {actual.dtype}, expected {expected.dtype}")
                try:
                    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL)
                except AssertionError as e:
                    raise TestFailure(f"{where}: values differ{e}")
    except TestFailure as e:
        return name, False, str(e)
    except Exception as e:  # a broken data file or an unexpected tool output
        return name, False, f"{type(e).__name__}: {e}"
    return name, True, ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="directory holding castor and castor-run")
    ap.add_argument("--allow-list", required=True)
    ap.add_argument("--work", required=True, help="scratch directory (one subdirectory per test)")
    ap.add_argument("--data", default=default_data_dir(), help="ONNX node test directory")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", nargs="*", help="run only these tests (the allow-list is still checked)")
    ap.add_argument("--all", action="store_true", help="also run excluded tests, for information")
    args = ap.parse_args()

    start = time.time()
    for tool in ("castor", "castor-run"):
        if not os.access(os.path.join(args.bin, tool), os.X_OK):
            print(f"error: {os.path.join(args.bin, tool)} is not an executable")
            return 2
    supported = discover(args.data)
    entries, errors = read_allow_list(args.allow_list)
    errors += check_allow_list(entries, supported, args.data)
    if errors:
        for e in errors:
            print(f"allow-list error: {e}")
        print(f"{len(errors)} allow-list error(s); {len(supported)} node tests use only supported ops")
        return 2

    to_run = [n for n in supported if entries[n][0] == "pass" or args.all]
    if args.only:
        unknown = [n for n in args.only if n not in entries]
        if unknown:
            print(f"error: --only names tests that are not in the allow-list: {unknown}")
            return 2
        to_run = [n for n in to_run if n in set(args.only)]
    os.makedirs(args.work, exist_ok=True)
    work = os.path.abspath(args.work)
    bin_dir = os.path.abspath(args.bin)

    results = {}
    with concurrent.futures.ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(run_test, n, args.data, bin_dir, work) for n in to_run]
        for future in concurrent.futures.as_completed(futures):
            name, ok, message = future.result()
            results[name] = (ok, message)
            action, reason = entries[name]
            if action == "pass":
                print(f"{'PASS' if ok else 'FAIL'} {name}" + ("" if ok else "\n    " + message.replace("\n", "\n    ")),
                      flush=True)
            else:
                print(f"{'XPASS' if ok else 'XFAIL'} {name}  # {reason}"
                      + ("" if ok else "\n    " + message.replace("\n", "\n    ")), flush=True)

    failed = sorted(n for n, (ok, _) in results.items() if not ok and entries[n][0] == "pass")
    passed = sorted(n for n, (ok, _) in results.items() if ok and entries[n][0] == "pass")
    excluded = [n for n in supported if entries[n][0] == "exclude"]
    print()
    print(f"{len(supported)} node tests use only supported ops: {len(passed)} passed, {len(failed)} failed, "
          f"{len(excluded)} excluded ({time.time() - start:.0f} s)")
    if args.all:
        xpass = sorted(n for n in excluded if n in results and results[n][0])
        if xpass:
            print(f"excluded but passing: {' '.join(xpass)}")
    for n in failed:
        print(f"FAILED: {n}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
