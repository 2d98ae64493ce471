#!/usr/bin/env bash
# Installs the package into a scratch prefix, then builds the consumer
# example project with find_package(tagwire) and a C program with
# pkg-config, and runs both.
set -euo pipefail
build="$1"; consumer="$2"
scratch="$(mktemp -d)"; trap 'rm -rf "$scratch"' EXIT
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
for f in include/tagwire.h include/tagwire.hpp lib/libtagwire_c.so lib/libtagwire_c.a \
         lib/cmake/tagwire/tagwireConfig.cmake lib/pkgconfig/tagwire.pc bin/tagwire bin/tagwired; do
  [ -f "$scratch/prefix/$f" ] || { echo "not installed: $f"; exit 1; }
done
# The CLI and the daemon run from there, at the library's version.
cli="$("$scratch/prefix/bin/tagwire" --version)"
daemon="$("$scratch/prefix/bin/tagwired" --version)"
[ "${cli#tagwire }" = "${daemon#tagwired }" ] || { echo "versions differ: $cli / $daemon"; exit 1; }
echo "installed: $cli, $daemon"
cmake -S "$consumer" -B "$scratch/consumer" -DCMAKE_PREFIX_PATH="$scratch/prefix" >/dev/null
cmake --build "$scratch/consumer" >/dev/null
"$scratch/consumer/tagwire-consumer"
if command -v pkg-config >/dev/null; then
  export PKG_CONFIG_PATH="$scratch/prefix/lib/pkgconfig"
  printf '#include <tagwire.h>\n#include <stdio.h>\nint main(void){printf("pkg-config: tagwire %%s\\n", tw_version());return 0;}\n' > "$scratch/v.c"
  # shellcheck disable=SC2046
  cc "$scratch/v.c" -o "$scratch/v" $(pkg-config --cflags --libs tagwire) -Wl,-rpath,"$scratch/prefix/lib"
  "$scratch/v"
else
  echo "pkg-config: skipped, pkg-config is not installed"
fi
