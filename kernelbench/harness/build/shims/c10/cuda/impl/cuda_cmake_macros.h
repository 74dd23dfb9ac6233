// Stand-in for the header CMake generates in CUDA builds of PyTorch, absent from the CPU wheel; it lets
// `nvcc -c` compile-check candidate CUDA sources against the CPU wheel's headers (kernelbench/builds.py).
#pragma once
#define C10_CUDA_BUILD_SHARED_LIBS
