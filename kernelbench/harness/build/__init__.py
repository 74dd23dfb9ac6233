"""Building a candidate: the compile child, the build cache and its quota, precompiled headers, the toolchain, the built library's imports."""
