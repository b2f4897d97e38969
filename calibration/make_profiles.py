"""Rebuild the shipped profiles from the committed raw measurements (CPU only, no torch):

    python -m calibration.make_profiles

reads the clean timing process's output (calibration/measured/h200-round-b/timing.json) and the counts
process's output (h200-round-a/counts_eager.json: cuBLAS kernels per GEMM call, CUPTI kernel durations
for the trace node gap), plus the graph-memory measurements where calibration/build_memory.py exists,
and, where calibration/measured/h200-engine/engine_loop.json exists, the engine loop's host work
(calibration/build_engine.py) and the start-up figures (calibration/fit_startup.py `derive`), and, where calibration/measured/h200-round-d/moe_fp8.json exists, the FP8 and MoE tables
(calibration/build_moe_fp8.py), and, where calibration/measured/h200-round-f/verify_timing.json exists, the
verify-attention (q_len > 1) tables (calibration/build_spec.py), and writes simulator/profiles/h200.json (measured) and h100-sxm.json (derived by datasheet ratios).
The device sections that are not fitted here (collective figures, device-wide graph-memory constants) and the
H200 start-up figures carried into h100-sxm and the datasheet-*.json profiles: calibration/device_sections.py.
Nothing is fitted on decode rows.
"""

from __future__ import annotations

import json
from pathlib import Path

from simulator.model.profile import parse_profile

from .build_engine import engine_section, startup_figures
from .build_memory import memory_section
from .build_profile import build, derive_h100, with_decoder_figures, write_json_atomic
from .device_sections import add_to_measured, carry, datasheets

ROOT = Path(__file__).resolve().parent
MEASURED = ROOT / "measured"
PROFILES = ROOT.parent / "simulator" / "profiles"
TIMING = MEASURED / "h200-round-b" / "timing.json"
COUNTS = MEASURED / "h200-round-a" / "counts_eager.json"
MEMORY_DIR = MEASURED / "h200-round-a"
DEPTH = MEASURED / "h200-depth" / "depth.json"
ENGINE = MEASURED / "h200-engine" / "engine_loop.json"  # calibration/scripts/engine_loop.py (host.engine_step_us)
# torch.compile start-up rows: static (2 model sizes, shallow cuts + full depth) and dynamic, one machine
COMPILE = (MEASURED / "h200-round-d" / "engine_loop.json", MEASURED / "h200-round-e" / "engine_loop.json")


def startup_data() -> dict:
    """The start-up model's measured rows: capture (and the loop's captures) from ENGINE, compile from COMPILE."""
    data = json.loads(ENGINE.read_text())
    comp = [r for f in COMPILE if f.exists() for r in json.loads(f.read_text()).get("compile", [])]
    return {"capture": data.get("capture", []), "loop": data.get("loop", []), "compile": comp}


def startup_source() -> str:
    return " + ".join(str(f.relative_to(ROOT.parent)) for f in (ENGINE, *COMPILE) if f.exists())


MOE_FP8 = MEASURED / "h200-round-d" / "moe_fp8.json"  # calibration/scripts/moe_fp8.py (FP8 / MoE tables, build_moe_fp8)
SPEC = (MEASURED / "h200-round-g" / "inplace.json",)  # round_g.py: verify attention q_len > 1 in place (build_spec)
if not SPEC[0].exists():  # round f's isolated SDPA rows, as the profile carried them before round g
    SPEC = (MEASURED / "h200-round-f" / "verify_timing.json", MEASURED / "h200-round-f" / "attention_llama3-8b_8192.json")
ROUND_I = MEASURED / "h200-round-i"  # calibration/scripts/round_i.py (build_compiled.py)
ROUND_K = MEASURED / "h200-round-k"  # calibration/scripts/round_k.py: GEMMs over a rule-chosen (n, k) grid
ROUND_AH = MEASURED / "h200-round-ah"  # round_k.py --set lora on an H200: a LoRA adapter's GEMMs, added to that grid
ROUND_N = MEASURED / "h200-round-n"  # calibration/scripts/round_n.py: graph-boundary device cost (build_graph_latency)
ROUND_T = MEASURED / "h200-round-t"  # calibration/scripts/round_t.py: aten's row mean by (rows, cols) (build_row_mean)
ROUND_W = MEASURED / "h200-round-w"  # calibration/scripts/round_w.py: aten's roll of a KV cache by bytes (build_roll)
COMPILED_FIT = {"model": "qwen3-0.6b", "fusion": "compiled", "dynamic": False, "batch": 1, "ctx": 512}


def compiled_fit_row(timing: dict) -> dict | None:
    """The one decode row the compiled wrapper cost is fitted on (never scored by validation)."""
    for r in timing["rows"]:
        if all(r.get(k) == v for k, v in COMPILED_FIT.items()) and "eager" in r:
            return r
    return None


def build_h200() -> tuple[dict, str]:
    """The h200 profile from the committed measurements, and the note on its one fitted figure."""
    timing = json.loads(TIMING.read_text())
    counts = json.loads(COUNTS.read_text())
    p = build(timing, counts, name="h200")
    if (ROUND_T / "timing.json").exists():  # before the decoder figures: graph_node_us is the depth sweep's slope
        # beyond the priced kernels, so the kernels are priced as the profile will price them
        from .build_row_mean import add_row_mean

        add_row_mean(p, ROUND_T, str(ROUND_T.relative_to(ROOT.parent)))
    if (ROUND_W / "round_w.json").exists():
        from .build_roll import add_roll

        add_roll(p, ROUND_W, str(ROUND_W.relative_to(ROOT.parent)))
    from .hostprobe import MEASURED, with_slow_state

    p["host"]["canary"] = with_slow_state(p["host"]["canary"], [MEASURED / f"h200-round-{r}" for r in "bcde"])
    if ROUND_I.exists():  # round i: Triton kernel curves, and the compiled wrapper fitted on the reference decoder's
        # compiled rows of rounds b and i (calibration/build_compiled.py) instead of round b's one row
        from .build_compiled import add_triton_curves, fit_compiled_wrapper

        p, note = with_decoder_figures(p, json.loads(DEPTH.read_text()), None)
        add_triton_curves(p, ROUND_I)
        w, wnote = fit_compiled_wrapper(p, timing, json.loads((ROUND_I / "host.json").read_text()))
        p["host"]["compiled_wrapper_us"] = w
        p["notes"] = p["notes"].rstrip(".") + "; " + wnote + "."
        note += "; " + wnote
    else:
        p, note = with_decoder_figures(p, json.loads(DEPTH.read_text()), compiled_fit_row(timing))
    if (ROUND_K / "timing.json").exists():
        from .build_gemm_grid import add_gemm_grid

        add_gemm_grid(p, ROUND_K, str(ROUND_K.relative_to(ROOT.parent)))
        if (ROUND_AH / "lora" / "timing.json").exists():  # an adapter's skinny GEMMs (round_k --set lora)
            from .build_gemm_grid import extend_gemm_grid

            extend_gemm_grid(p, ROUND_AH / "lora", str((ROUND_AH / "lora").relative_to(ROOT.parent)))
    if (ROUND_N / "timing.json").exists():
        from .build_graph_latency import add_graph_latency

        add_graph_latency(p, ROUND_N)
    p["device"]["graph_memory"] = memory_section(MEMORY_DIR)
    add_to_measured(p, str(MEMORY_DIR.relative_to(ROOT.parent)))  # device.collective, device.graph_memory_constants
    if MOE_FP8.exists():
        from .build_moe_fp8 import add_to_profile

        add_to_profile(p, json.loads(MOE_FP8.read_text()))
    if SPEC[0].exists():
        from .build_spec import add_to_profile as add_verify_attention

        add_verify_attention(p, [json.loads(f.read_text()) for f in SPEC if f.exists()])
    if ENGINE.exists():
        p["host"]["engine_step_us"] = engine_section(json.loads(ENGINE.read_text()),
                                                     str(ENGINE.relative_to(ROOT.parent)))
        from .fit_startup import derive

        # start-up figures: the eager-pass predictions they are scaled on come from this very profile
        p["host"]["startup"] = derive(startup_figures(startup_data()), parse_profile(p, "h200"), startup_source())
    return p, note


H100_CALIB = MEASURED / "h100-calib" / "timing.json"
H100_GEMM = MEASURED / "h100-round-ac"  # the H100's own GEMM tables and grid (round ac)
H100_AE = MEASURED / "h100-round-ae"  # the H100's own Triton curves (round i's triton job, ri/) and row means (rt/)
H100_AH = MEASURED / "h100-round-ah"  # the H100's LoRA GEMMs (round_k --set lora, lora/): appended to the grid


def add_h100_measured(q: dict) -> None:
    """Replace h100-sxm's derived Triton curves and row-mean table by round ae's H100 measurements (the H200 profile's
    own methods: calibration/build_compiled.add_triton_curves, calibration/build_row_mean.add_row_mean), and add round
    ah's LoRA GEMMs to its GEMM grid (calibration/build_gemm_grid.extend_gemm_grid)."""
    from .build_compiled import add_triton_curves
    from .build_row_mean import add_row_mean

    if (H100_AE / "ri" / "triton.json").exists():
        add_triton_curves(q, H100_AE / "ri")
    if (H100_AH / "lora" / "timing.json").exists():
        from .build_gemm_grid import extend_gemm_grid

        n = extend_gemm_grid(q, H100_AH / "lora", f"{H100_AH.name}/lora (an H100, calibration/scripts/round_k.py "
                                                  f"--set lora)")
        q["device"]["source"] += f"; {n} LoRA GEMM shapes in gemm_grid from {H100_AH.name}/lora (an H100)"
    if (H100_AE / "rt" / "timing.json").exists():
        add_row_mean(q, H100_AE / "rt", str((H100_AE / "rt").relative_to(ROOT.parent)))
        q["device"]["source"] += f"; row_mean from {H100_AE.name}/rt (an H100)"


def h100_copy_tbps() -> float | None:
    """The H100's device-to-device copy bandwidth (bytes read + written), measured by the H100 calibration round's
    timing process (ceilings.copy_tbps); None where that file is absent (the derivation falls back to the datasheet
    ratio)."""
    if not H100_CALIB.exists():
        return None
    return float(json.loads(H100_CALIB.read_text())["ceilings"]["copy_tbps"])


def main() -> None:
    p, _ = build_h200()
    parse_profile(p, "h200")
    write_json_atomic(p, PROFILES / "h200.json")
    q = derive_h100(p, copy_tbps=h100_copy_tbps(), copy_source=str(H100_CALIB.relative_to(ROOT.parent)),
                    gemm_round=H100_GEMM if H100_GEMM.exists() else None,
                    h100_timing=json.loads(H100_CALIB.read_text()) if H100_CALIB.exists() else None)
    from .build_moe_fp8 import derive_h100_moe

    derive_h100_moe(q)
    add_h100_measured(q)
    carry(q, p)  # H200 start-up / graph-memory constants, by assumption, with their source
    parse_profile(q, "h100-sxm")
    write_json_atomic(q, PROFILES / "h100-sxm.json")
    print(f"wrote {PROFILES / 'h200.json'} and {PROFILES / 'h100-sxm.json'}")
    print("wrote " + ", ".join(str(f) for f in datasheets(p, PROFILES)))


if __name__ == "__main__":
    main()
