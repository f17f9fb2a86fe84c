# difflens — one Makefile: make, make test, make asan, make lint, make fuzz, make bench, make demo, make format,
# make install / make uninstall (PREFIX, DESTDIR).

BUILD    ?= build
BIN      ?= bin
CC       ?= gcc
OPT      ?= -O2
SAN      ?=
BLAS_DIR := /usr/lib/x86_64-linux-gnu/openblas-openmp
PKGS     := hdf5 libcjson libpng libjpeg libdeflate ompi-c libmicrohttpd libpcre2-8 cairo pangocairo fontconfig

# OpenBLAS's OpenMP build: BLAS calls made inside our parallel regions run serially
# instead of starting a second thread pool that fights OpenMP's for the cores.
CPPFLAGS += -Ilib -I/usr/include/x86_64-linux-gnu/openblas-openmp -D_GNU_SOURCE \
            $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
CFLAGS   += -std=c11 -Wall -Wextra -Werror $(OPT) -g -fopenmp $(SAN)
LDLIBS   += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lhdf5_hl \
            -L$(BLAS_DIR) -Wl,-rpath,$(BLAS_DIR) -lopenblas -lz -lm
# --as-needed: a tool loads only the libraries it calls (attnmap, outliers and noise
# never load OpenBLAS, whose start-up and OpenMP settings cost them time).
LDFLAGS  += -fopenmp -Wl,--as-needed $(SAN)

LIB_SRC  := $(wildcard lib/*/*.c)
LIB_OBJ  := $(LIB_SRC:lib/%.c=$(BUILD)/lib/%.o)
LIB_A    := $(BUILD)/libdifflens.a
TOOLS    := $(notdir $(wildcard tools/*))
TOOL_BIN := $(TOOLS:%=$(BIN)/%)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
DEPS_OK  := $(BUILD)/.deps-ok

# The version is written once, in lib/base/version.h: --version, the soname, difflens.pc.
VERSION  := $(shell sed -n 's/^\#define DFL_VERSION "\(.*\)"/\1/p' lib/base/version.h)
SOMAJOR  := $(firstword $(subst ., ,$(VERSION)))
# The shared library's objects are compiled again with -fPIC into their own folder, so
# the static library and the tools stay exactly as they were.
PIC_OBJ  := $(LIB_SRC:lib/%.c=$(BUILD)/pic/lib/%.o)
LIB_SO   := $(BUILD)/libdifflens.so.$(VERSION)

.PHONY: all test asan lint fuzz bench bench-8b bench-motif demo demo-models format clean deps install uninstall man completion shared
all: $(TOOL_BIN)

# Installs missing Debian packages as root, or prints the command and stops.
$(DEPS_OK): scripts/deps.sh
	@scripts/deps.sh
	@mkdir -p $(@D) && touch $@
deps: $(DEPS_OK)

$(BUILD)/lib/%.o: lib/%.c | $(DEPS_OK)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIB_A): $(LIB_OBJ)
	$(AR) rcs $@ $^

# bin/view's page is linked in with the assembler's .incbin (lib/view/view_assets.c).
$(BUILD)/lib/view/view_assets.o $(BUILD)/pic/lib/view/view_assets.o: $(wildcard lib/view/assets/*)

$(BUILD)/pic/lib/%.o: lib/%.c | $(DEPS_OK)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -MMD -MP -c $< -o $@

# libdifflens.so.VERSION, soname libdifflens.so.MAJOR, linked against what it uses.
$(LIB_SO): $(PIC_OBJ)
	$(CC) -shared -Wl,-soname,libdifflens.so.$(SOMAJOR) $(LDFLAGS) $^ -o $@ $(LDLIBS)
shared: $(LIB_SO)

$(BUILD)/tools/%.o: tools/%.c | $(DEPS_OK)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

define TOOL_RULE
$(BIN)/$(1): $(patsubst tools/$(1)/%.c,$(BUILD)/tools/$(1)/%.o,$(wildcard tools/$(1)/*.c)) $(LIB_A)
	@mkdir -p $$(@D)
	$$(CC) $$(LDFLAGS) $$^ -o $$@ $$(LDLIBS)
endef
$(foreach t,$(TOOLS),$(eval $(call TOOL_RULE,$(t))))

$(BUILD)/tests/%.o: tests/%.c | $(DEPS_OK)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(LIB_A)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) -lcmocka

# Unit suites (cmocka), then end-to-end and reference tests (tests/*.sh, tests/*.py).
test: $(TOOL_BIN) $(TEST_BIN)
	@BUILD=$(BUILD) BIN=$(BIN) sh tests/run.sh $(TEST_BIN)

# Layering, references outside the repository, unused includes (docs/design.md).
# Also run by `make test` (tests/run.sh), so CI checks it.
lint:
	@/usr/bin/python3 scripts/lint.py

asan:
	$(MAKE) BUILD=build-asan BIN=build-asan/bin OPT=-O1 \
	    SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" test

FUZZ_TIME ?= 60
# fuzz_dump_read runs without leak detection (HDF5 keeps free lists and caches that look
# like leaks after a malformed file) and in fork mode, going on after HDF5 1.10's own
# crashes and hangs on corrupt files; fuzz/triage.py then fails the run only for a
# finding in difflens' code (or in a buffer of ours that HDF5 overran).
FUZZ_SRC  := $(wildcard fuzz/fuzz_*.c)
fuzz:
	@scripts/deps.sh --fuzz
	$(MAKE) BUILD=build-fuzz BIN=build-fuzz/bin CC=clang OPT="-O1 -Wno-pass-failed" \
	    SAN="-fsanitize=fuzzer-no-link,address,undefined" build-fuzz/libdifflens.a
	@mkdir -p build-fuzz/fuzz
	@for f in $(FUZZ_SRC); do n=$$(basename $$f .c); \
	    clang $(CPPFLAGS) -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined $$f \
	        build-fuzz/libdifflens.a -o build-fuzz/fuzz/$$n $(LDLIBS) -fopenmp || exit 1; \
	    mkdir -p build-fuzz/corpus/$$n; cp -n fuzz/seeds/$$n/* build-fuzz/corpus/$$n/ 2>/dev/null; \
	    [ $$n = fuzz_safetensors ] && /usr/bin/python3 fuzz/make_seeds.py build-fuzz/corpus/$$n; \
	    [ $$n = fuzz_dump_read ] && /usr/bin/python3 fuzz/make_dump_seeds.py build-fuzz/corpus/$$n; \
	    echo "== $$n ($(FUZZ_TIME)s)"; \
	    if [ $$n = fuzz_dump_read ]; then \
	        rm -rf build-fuzz/findings && mkdir -p build-fuzz/findings; \
	        build-fuzz/fuzz/$$n -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 -timeout=5 \
	            -max_total_time=$(FUZZ_TIME) -detect_leaks=0 -artifact_prefix=build-fuzz/findings/ \
	            build-fuzz/corpus/$$n 2>&1 | grep -E '^#[0-9]+: ' | tail -n 1; \
	        /usr/bin/python3 fuzz/triage.py build-fuzz/fuzz/$$n build-fuzz/findings/* || exit 1; \
	    else \
	        build-fuzz/fuzz/$$n -max_total_time=$(FUZZ_TIME) -print_final_stats=1 \
	            -artifact_prefix=build-fuzz/ build-fuzz/corpus/$$n > build-fuzz/$$n.log 2>&1; rc=$$?; \
	        tail -n 12 build-fuzz/$$n.log; [ $$rc -eq 0 ] || { echo "make fuzz: $$n failed (build-fuzz/$$n.log)"; exit 1; }; \
	    fi; \
	done

$(BUILD)/bench/%: bench/%.c $(LIB_A) | $(DEPS_OK)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $< $(LIB_A) -o $@ $(LDFLAGS) $(LDLIBS)

bench: all $(BUILD)/bench/overhead $(BUILD)/bench/map_write $(BUILD)/bench/tokenize_speed $(BUILD)/bench/gemm_shapes
	@scripts/deps.sh --bench
	@BIN=$(BIN) BUILD=$(BUILD) sh bench/run.sh

# An 8B Llama-3-shaped bf16 model (16 GB, written once into DIR) through probe on a
# 1024-token prompt: peak RSS, time, GFLOP/s. A benchmark, not a test.
bench-8b: all
	@[ -n "$(DIR)" ] || { echo "usage: make bench-8b DIR=folder-for-the-16-GB-model" >&2; exit 2; }
	@scripts/deps.sh --bench
	@BIN=$(BIN) DIR=$(DIR) sh bench/bench_8b.sh

# The published Motif shapes in bf16 (Motif-2.6B at 2048 tokens, Motif-2-12.7B at 1024:
# 5.2 and 25.4 GB, written once into DIR) through probe: peak RSS, time, GFLOP/s.
bench-motif: all
	@[ -n "$(DIR)" ] || { echo "usage: make bench-motif DIR=folder-for-the-31-GB-of-models" >&2; exit 2; }
	@scripts/deps.sh --bench
	@BIN=$(BIN) DIR=$(DIR) sh bench/bench_motif.sh

demo: all
	@BIN=$(BIN) sh scripts/demo.sh

# The demo protocol (scripts/seeds.sh, demo/README.md): per seed 1, 2, 3 a matched
# Transformer / Diff pair (3000 steps of a 6000-step schedule) and the Diff model with
# lambda held at 0 (1500 steps), two runs at once on one thread each: about 20 minutes
# on 2 quiet cores, over an hour on a busy machine (resumable: run it again after an
# interruption). Then the summaries go to demo/seeds and the seed-1 pair to demo/models.
DEMO_RUNS := out/seeds
demo-models: all
	@echo "demo-models: 9 training runs (3 seeds x Transformer, Diff, Diff lambda=0): about 20 minutes on 2 quiet cores, over an hour on a busy machine"
	BIN=$(BIN) sh scripts/seeds.sh $(DEMO_RUNS) 1,2,3
	mkdir -p demo/seeds
	for f in seeds_curves.csv seeds_steps_to.csv seeds_steps_to.md seeds.png mechanisms.md mechanisms.csv; do \
	    cp $(DEMO_RUNS)/$$f demo/seeds/; done
	for s in 1 2 3; do for m in transformer diff diff_lambda0; do \
	    cp $(DEMO_RUNS)/seed-$$s/$$m/train.csv demo/seeds/train-seed$$s-$$m.csv; done; done
	for m in transformer diff; do mkdir -p demo/models/$$m && \
	    cp $(DEMO_RUNS)/seed-1/$$m/config.json $(DEMO_RUNS)/seed-1/$$m/model.safetensors \
	       $(DEMO_RUNS)/seed-1/$$m/train.csv $(DEMO_RUNS)/seed-1/$$m/train.png demo/models/$$m/; done
	cp $(DEMO_RUNS)/seed-1/train.png demo/models/train.png

# Every C file as .clang-format says; make lint (part of make test) fails on any it would change.
format:
	clang-format -i --style=file $$(find lib tools tests fuzz bench -name '*.[ch]' | sort)

# ---------------------------------------------------------------- install
# make install PREFIX=/usr/local DESTDIR=: the tools, libdifflens (static, and shared
# with a soname), the public headers under include/difflens (scripts/public_headers.py
# says which), difflens.pc, a man page per tool and bash completion (both generated
# from the tools themselves: scripts/man.py, scripts/completion.py), the docs.
# make uninstall (same PREFIX, DESTDIR) removes exactly those files.
PREFIX     ?= /usr/local
DESTDIR    ?=
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR     ?= $(PREFIX)/share/man
DOCDIR     ?= $(PREFIX)/share/doc/difflens
COMPDIR    ?= $(PREFIX)/share/bash-completion/completions
PUB_H       = $(shell /usr/bin/python3 scripts/public_headers.py)
DOCS       := README.md $(wildcard docs/*.md)
DOC_IMG    := $(wildcard docs/img/*)
# dump.h includes <hdf5.h>: hdf5 is a public requirement. The other libraries are
# shared ones, named in Libs.private (for `pkg-config --static`, linking libdifflens.a)
# rather than Requires.private, which would ask for their own static dependencies too.
PC_PRIVATE := $(filter-out hdf5,$(PKGS))

$(BUILD)/man/.stamp: $(TOOL_BIN) scripts/man.py docs/exit-codes.md
	@rm -rf $(@D) && mkdir -p $(@D)
	/usr/bin/python3 scripts/man.py $(BIN) docs/exit-codes.md $(@D)
	@touch $@
$(BUILD)/completion/.stamp: $(TOOL_BIN) scripts/completion.py
	@rm -rf $(@D) && mkdir -p $(@D)
	/usr/bin/python3 scripts/completion.py $(BIN) $(@D)
	@touch $@
man: $(BUILD)/man/.stamp
completion: $(BUILD)/completion/.stamp

$(BUILD)/difflens.pc: lib/base/version.h Makefile FORCE
	@mkdir -p $(@D)
	@printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(patsubst $(PREFIX)%,$${prefix}%,$(LIBDIR))' 'includedir=$(patsubst $(PREFIX)%,$${prefix}%,$(INCLUDEDIR))/difflens' '' \
	    'Name: difflens' 'Description: Instrumented forward passes and dumps for (Differential) Transformers' \
	    'Version: $(VERSION)' 'Requires: hdf5' \
	    'Cflags: -I$${includedir}' \
	    'Libs: -L$${libdir} -ldifflens' \
	    'Libs.private: -fopenmp $(shell pkg-config --libs $(PC_PRIVATE) 2>/dev/null) -lhdf5_hl -L$(BLAS_DIR) -Wl,-rpath,$(BLAS_DIR) -lopenblas -lz -lm' \
	    > $@.tmp && mv $@.tmp $@
FORCE:

install: $(TOOL_BIN) $(LIB_A) $(LIB_SO) $(BUILD)/man/.stamp $(BUILD)/completion/.stamp $(BUILD)/difflens.pc
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(MANDIR)/man1 \
	    $(DESTDIR)$(DOCDIR)/img $(DESTDIR)$(COMPDIR)
	install -m 755 $(TOOL_BIN) $(DESTDIR)$(BINDIR)/
	install -m 644 $(LIB_A) $(DESTDIR)$(LIBDIR)/libdifflens.a
	install -m 755 $(LIB_SO) $(DESTDIR)$(LIBDIR)/libdifflens.so.$(VERSION)
	ln -sf libdifflens.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libdifflens.so.$(SOMAJOR)
	ln -sf libdifflens.so.$(SOMAJOR) $(DESTDIR)$(LIBDIR)/libdifflens.so
	for h in $(PUB_H); do d=$(DESTDIR)$(INCLUDEDIR)/difflens/$$(basename $$(dirname $$h)); \
	    install -d $$d && install -m 644 $$h $$d/ || exit 1; done
	install -m 644 $(BUILD)/difflens.pc $(DESTDIR)$(LIBDIR)/pkgconfig/difflens.pc
	install -m 644 $(TOOLS:%=$(BUILD)/man/%.1) $(DESTDIR)$(MANDIR)/man1/
	install -m 644 $(TOOLS:%=$(BUILD)/completion/%) $(DESTDIR)$(COMPDIR)/
	install -m 644 $(DOCS) $(DESTDIR)$(DOCDIR)/
	$(if $(DOC_IMG),install -m 644 $(DOC_IMG) $(DESTDIR)$(DOCDIR)/img/)

uninstall:
	rm -f $(TOOLS:%=$(DESTDIR)$(BINDIR)/%) $(TOOLS:%=$(DESTDIR)$(MANDIR)/man1/%.1) \
	    $(TOOLS:%=$(DESTDIR)$(COMPDIR)/%) $(DESTDIR)$(LIBDIR)/libdifflens.a \
	    $(DESTDIR)$(LIBDIR)/libdifflens.so $(DESTDIR)$(LIBDIR)/libdifflens.so.$(SOMAJOR) \
	    $(DESTDIR)$(LIBDIR)/libdifflens.so.$(VERSION) $(DESTDIR)$(LIBDIR)/pkgconfig/difflens.pc
	rm -rf $(DESTDIR)$(INCLUDEDIR)/difflens $(DESTDIR)$(DOCDIR)

clean:
	rm -rf build build-asan build-fuzz bin

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
.SECONDARY:
