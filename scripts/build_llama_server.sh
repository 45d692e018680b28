#!/usr/bin/env bash
# llama.cpp's own server (llama-server), built from the llama.cpp that the llama-cpp-python
# sdist vendors: the same llama.cpp the local extra installs, so both servers of the live
# tier run one model on one engine. Prints the binary's path on its last line.
#
#   scripts/build_llama_server.sh VERSION CACHE_DIR [CMAKE_ARGS...]
#
# The binary is kept at CACHE_DIR/llama-server-VERSION/llama-server, outside the work tree
# (make clean keeps it): a second run prints the path at once. The first build takes about
# 15 minutes on 2 cores (longer on a busy machine); the sdist comes through pip (its HTTP
# cache keeps it). Nothing else is downloaded: no web UI, no curl, no OpenSSL.
set -euo pipefail
version="$1"
cache="$2"
shift 2
python="${PYTHON:-python3}"
out="$cache/llama-server-$version"
if [ -x "$out/llama-server" ]; then
  echo "$out/llama-server"
  exit 0
fi
mkdir -p "$cache/sdist"
sdist="$cache/sdist/llama_cpp_python-$version.tar.gz"
if [ ! -f "$sdist" ]; then
  echo "llama-server: fetching the llama-cpp-python $version sdist (pip)" >&2
  "$python" -m pip download --quiet --no-binary :all: --no-deps \
    "llama-cpp-python==$version" -d "$cache/sdist" >&2
fi
source="$cache/sdist/llama_cpp_python-$version/vendor/llama.cpp"
if [ ! -f "$source/CMakeLists.txt" ]; then
  tar -xzf "$sdist" -C "$cache/sdist"
fi
build="$cache/llama-build-$version"
echo "llama-server: building llama.cpp $version's server in $build (about 15 minutes the first time)" >&2
cmake -S "$source" -B "$build" -DCMAKE_BUILD_TYPE=Release "$@" \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF >"$build.log" 2>&1 \
  || { tail -30 "$build.log" >&2; exit 1; }
cmake --build "$build" --target llama-server -j"${JOBS:-2}" >>"$build.log" 2>&1 \
  || { tail -30 "$build.log" >&2; exit 1; }
mkdir -p "$out"
cp "$build/bin/llama-server" "$out/llama-server.tmp"
mv "$out/llama-server.tmp" "$out/llama-server"
rm -rf "$build" "$cache/sdist/llama_cpp_python-$version"
echo "$out/llama-server"
