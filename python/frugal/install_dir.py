"""Prints where `meson install` puts the frugal package for this interpreter and install prefix
(python/frugal/meson.build): Debian's own scheme for /usr/local (on its sys.path), else the standard
layout under the prefix."""
import sys
import sysconfig

prefix = sys.argv[1]
if sysconfig.get_default_scheme() == "posix_local" and prefix == "/usr/local":
    print(sysconfig.get_path("platlib"))
else:
    print(sysconfig.get_path("platlib", "posix_prefix", vars={"base": prefix, "platbase": prefix}))
