"""Telemetry: which GPU a reading is of, and the CPU reading (the NVML reading itself runs under `gpu`)."""

from __future__ import annotations

from kernelbench.harness.insight import telemetry


def test_the_reading_is_of_the_gpu_this_process_was_given():
    assert telemetry.visible_gpu("") == 0  # nothing pinned: device 0
    assert telemetry.visible_gpu("3") == 3  # a Ray run actor holding GPU 3
    assert telemetry.visible_gpu(" 5,1") == 5
    uuid = "GPU-8f0c2a53-1b7e-4c1e-9a7d-2f6a1c7b9e10"
    assert telemetry.visible_gpu(f"{uuid},GPU-other") == uuid
    assert telemetry.visible_gpu("MIG-1234") == "MIG-1234"


def test_cpu_reading_names_the_processor():
    reading = telemetry.read("cpu")
    assert reading.device_name and reading.sm_clock_mhz == 0.0


def test_a_gpu_reading_that_cannot_be_taken_is_empty_not_an_error():
    """No NVML here (CPU machines, CI), and no GPU has this UUID on a GPU machine: an empty reading."""
    assert telemetry.read_gpu("GPU-00000000-0000-0000-0000-000000000000").device_name == ""
