# The one list of llama.cpp build flags, sourced by build-llama.sh (the
# embedded narrator's llama-cpp-python) and build-llama-server.sh.
#
# GGML_NATIVE=OFF: nothing is picked from the building CPU. A native build on a
# Xeon that reports AMX inside a sandbox that does not grant AMX tile state
# died with a general-protection fault at its first generation (issue 13).
# The target is any x86-64 with AVX2 (Haswell, 2013, and later; every AMD
# Zen): no AVX-512, no AMX. `make setup` then smoke-tests one token in its own
# process and refuses a build with CPU-specific paths compiled in
# (engine/providers/smoke.py). STORY_WORKBENCH_LLAMA_FLAGS is appended, so it wins.
LLAMA_VERSION=0.3.36
LLAMA_FLAGS="-DGGML_NATIVE=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_BACKEND_DL=OFF \
-DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
-DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF \
-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_OPENMP=OFF -DLLAMA_CURL=OFF \
${STORY_WORKBENCH_LLAMA_FLAGS:-}"
