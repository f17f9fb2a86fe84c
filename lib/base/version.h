/* version.h — the one place difflens' version is written. Every tool's --version, the
 * shared library's soname and difflens.pc read it (the Makefile takes it from here). */
#ifndef DFL_VERSION_H
#define DFL_VERSION_H

#define DFL_VERSION "0.3.0"

#endif
