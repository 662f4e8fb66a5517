#!/bin/sh
# Run by `meson install` after it copied the files (meson.add_install_script): an install into the
# system itself (no DESTDIR staging folder, as root) refreshes the dynamic linker's cache, so that a
# program built against libfrugal.so finds it without LD_LIBRARY_PATH (Debian's /etc/ld.so.conf.d
# lists /usr/local/lib/x86_64-linux-gnu, but the cache only learns of a new library from ldconfig).
if [ -n "${DESTDIR:-}" ]; then
  exit 0  # a staging folder: the system's cache is not ours to change
fi
if [ "$(id -u)" -eq 0 ] && command -v ldconfig > /dev/null 2>&1; then
  ldconfig
  echo "ldconfig: the dynamic linker's cache now knows libfrugal.so"
elif ! ldconfig -p 2>/dev/null | grep -c 'libfrugal\.so' > /dev/null; then
  echo "note: run 'sudo ldconfig' (or set LD_LIBRARY_PATH to the install's library folder) so that programs find libfrugal.so"
fi
