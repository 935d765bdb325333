# A thin wrapper around CMake so that the usual commands do what a C user expects.
# The real build description is CMakeLists.txt; everything here calls cmake or ctest.
#
#   make                 configure (first time) and build a release in $(BUILD_DIR), with
#                        the Python package in $(BUILD_DIR)/python when Python's headers
#                        are there (PYTHONPATH=$(BUILD_DIR)/python python3 -c 'import cuckoofilter')
#   make test            dependencies, build, ctest; then the same under ASan+UBSan, and
#                        the tests of concurrent filters under ThreadSanitizer
#                        (skip that second pass with CF_TEST_QUICK=1, make or env var)
#   make demo            build, then a tour of the cuckoo tool (scripts/demo.sh), of the
#                        Redis module on a private redis-server (scripts/demo-redis.sh) and
#                        of the example key/value store cuckoo-kv (scripts/demo-kv.sh)
#   make bench           build and run the benchmarks: build/cf-bench-speed (every operation
#                        against the machine's limit and libbloom, ~5 min), then the other
#                        bench/*.c but demo.c; BENCH_ARGS=--quick: cf-bench-speed's smoke run
#                        alone (a second)
#   make bench-icount    exact instructions per operation (valgrind callgrind; bench/icount.sh
#                        over bench/icount.c), the noise-free judge of a hot-path change
#   make bench-python    the Python package against a frozenset, a loop of `in` and the C
#                        library's batched lookup (bench/python_bench.py)
#   make bench-cli       keys per second of `cuckoo query` over 20M keys, half of them present
#                        (bench/cli_query.sh)
#   make figures         regenerate docs/img/fpr-vs-bits.png and docs/img/throughput-vs-load.png
#                        (bench/figures.sh: cf-bench-speed --figures, then gnuplot; ~1 min)
#   make bench-redis     the Redis module against Redis sets: throughput (redis-benchmark),
#                        memory per item, false positives (bench/redis_bench.py); the time
#                        each CF.LOADCHUNK of a 750 MiB filter holds the server
#                        (bench/redis_loadchunk.py)
#   make fuzz            build fuzz/fuzz_$(FUZZ_TARGET) (ops, deserialize, chunks, module,
#                        kvlog or keys; default ops) with clang, libFuzzer, ASan and UBSan
#                        (in $(FUZZ_BUILD_DIR)) and fuzz for FUZZ_SECONDS (60) over a scratch copy of
#                        fuzz/corpus/$(FUZZ_TARGET); crashes go to $(FUZZ_BUILD_DIR)/artifacts/
#                        (see fuzz/README.md). `make test` replays the committed corpora.
#   make install         build what is installed (the libraries, the tool, the module, the
#                        Python package for the system's python3) and install it to
#                        $(PREFIX) (DESTDIR honoured); make uninstall undoes it
#   make deb             Debian packages (dpkg-buildpackage over debian/) in
#                        $(DEB_BUILD_DIR): libcuckoofilter0.MINOR, libcuckoofilter-dev,
#                        cuckoo (the tool and its man page), redis-cuckoofilter (the module,
#                        in /usr/lib/redis/modules/), python3-cuckoofilter, and -dbgsym
#                        packages with the debug info
#   make format          clang-format every C source in place; make format-check checks
#   make deps            install the Debian packages the project needs
#   make clean           remove the build directories
#
# Variables: BUILD_DIR (build), ASAN_BUILD_DIR (build-asan), TSAN_BUILD_DIR (build-tsan),
# BUILD_TYPE (Release),
# PREFIX (/usr/local), DESTDIR, CC (compiler for the main build), ASAN_CC (compiler for
# the sanitizer build: clang if present, else gcc), JOBS (parallel jobs), CMAKE_ARGS
# (extra -D options), BENCH_ARGS (options of cf-bench-speed, e.g. --quick or --csv DIR;
# see the top of bench/speed.c), FUZZ_BUILD_DIR (build-fuzz), FUZZ_TARGET (ops),
# FUZZ_SECONDS (60), FUZZ_CC (clang), FUZZ_ARGS (extra libFuzzer options, e.g. -fork=2).
# With CI=true in the environment, warnings are errors.

BUILD_DIR      ?= build
ASAN_BUILD_DIR ?= build-asan
TSAN_BUILD_DIR ?= build-tsan
BUILD_TYPE     ?= Release
PREFIX         ?= /usr/local
# The Python the package is built and benchmarked for: Debian's (python/CMakeLists.txt).
PYTHON         ?= /usr/bin/python3
JOBS           ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE          ?= cmake
CTEST          ?= ctest
CLANG_FORMAT   ?= clang-format
CMAKE_ARGS     ?=
CF_TEST_QUICK  ?=
FUZZ_BUILD_DIR ?= build-fuzz
FUZZ_TARGET    ?= ops
FUZZ_SECONDS   ?= 60
FUZZ_CC        ?= clang
FUZZ_CXX       ?= clang++
FUZZ_ARGS      ?=
BENCH_ARGS     ?=
DEB_BUILD_DIR  ?= build-deb

# The sanitizer build prefers clang (its sanitizers need libclang-rt-14-dev, which
# scripts/install-deps installs) and pairs it with the matching C++ compiler for the C++
# header checks.
ASAN_CC  ?= $(shell command -v clang >/dev/null 2>&1 && echo clang || echo gcc)
ASAN_CXX ?= $(if $(filter clang%,$(notdir $(ASAN_CC))),clang++,g++)

# CC: make's built-in default ("cc") is left for CMake to choose; a CC given on the
# command line or in the environment is passed on. It takes effect when a build
# directory is first configured (CMake does not switch compilers in place).
ifneq ($(origin CC),default)
CONFIGURE_CC := CC="$(CC)"
endif

# Not `CMAKE_ARGS +=`: that would be ignored when CMAKE_ARGS is given on the command line.
ALL_CMAKE_ARGS = $(if $(filter true,$(CI)),-DCF_WERROR=ON) $(CMAKE_ARGS)

CONFIGURE = $(CONFIGURE_CC) $(CMAKE) -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	-DCMAKE_INSTALL_PREFIX=$(PREFIX) $(ALL_CMAKE_ARGS)

# Configure when the build directory is new or the configure command changed (PREFIX,
# BUILD_TYPE, CI, CMAKE_ARGS, CC); `make configure` forces it. CMake re-runs by itself
# when a CMakeLists.txt changes.
CONFIGURE_STAMP = $(BUILD_DIR)/.cf-configure-command
ifeq ($(wildcard $(BUILD_DIR)/CMakeCache.txt),)
CONFIGURE_NEEDED := yes
else ifneq ($(strip $(file < $(CONFIGURE_STAMP))),$(strip $(CONFIGURE)))
CONFIGURE_NEEDED := yes
endif
shell_quote = '$(subst ','\'',$(1))'

# Sanitizer build: Debug so that assertions stay on (no NDEBUG), but -O1 to keep the long
# tests affordable; every sanitizer report is fatal. The demo and benchmarks are left out.
CONFIGURE_ASAN = CC="$(ASAN_CC)" CXX="$(ASAN_CXX)" $(CMAKE) -S . -B $(ASAN_BUILD_DIR) \
	-DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g" -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
	-DCF_SANITIZE=address,undefined -DCF_BUILD_BENCH=OFF $(ALL_CMAKE_ARGS)

# ThreadSanitizer build: clang (as for fuzzing), Debug at -O1 like the ASan build; only
# the tests labelled "concurrent" are built and run there.
CONFIGURE_TSAN = CC="$(FUZZ_CC)" CXX="$(FUZZ_CXX)" $(CMAKE) -S . -B $(TSAN_BUILD_DIR) \
	-DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g" -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
	-DCF_SANITIZE=thread -DCF_BUILD_BENCH=OFF $(ALL_CMAKE_ARGS)
CF_TSAN_TESTS = test_concurrent test_window test_merge test_build

# libFuzzer build: clang (libFuzzer is clang's), ASan+UBSan like the sanitizer pass, -O2
# for speed. Only fuzz targets are built there; tests are the other builds' business.
CONFIGURE_FUZZ = CC="$(FUZZ_CC)" CXX="$(FUZZ_CXX)" $(CMAKE) -S . -B $(FUZZ_BUILD_DIR) \
	-DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O2 -g" -DCMAKE_CXX_FLAGS_DEBUG="-O2 -g" \
	-DCF_SANITIZE=address,undefined -DCF_FUZZ=ON -DCF_BUILD_BENCH=OFF $(ALL_CMAKE_ARGS)
FUZZ_CORPUS = $(FUZZ_BUILD_DIR)/corpus/$(FUZZ_TARGET)

.PHONY: all build configure test test-asan test-tsan demo bench bench-icount bench-python bench-cli figures bench-redis fuzz install deb uninstall format \
	format-check deps clean help

# Steps must run in order (deps, then build, then tests) even under `make -j`; the
# parallelism that matters is inside `cmake --build --parallel` and `ctest -j`.
.NOTPARALLEL:

# The build tree's own makefiles would otherwise announce every directory they enter.
MAKEFLAGS += --no-print-directory

all: build

configure:
	$(CONFIGURE)
	@printf '%s\n' $(call shell_quote,$(strip $(CONFIGURE))) > $(CONFIGURE_STAMP)

build: $(if $(CONFIGURE_NEEDED),configure)
	$(CMAKE) --build $(BUILD_DIR) --parallel $(JOBS)

deps:
	@scripts/install-deps

# Both passes always run; the target fails if either did.
test: deps build
	@status=0; \
	echo "== ctest ($(BUILD_DIR))"; \
	$(CTEST) --test-dir $(BUILD_DIR) --output-on-failure -j$(JOBS) || status=1; \
	if [ -n "$(filter-out 0,$(CF_TEST_QUICK))" ]; then \
		echo "== sanitizer pass skipped (CF_TEST_QUICK=$(CF_TEST_QUICK))"; \
	else \
		$(MAKE) --no-print-directory test-asan || status=1; \
		$(MAKE) --no-print-directory test-tsan || status=1; \
	fi; \
	if [ $$status -ne 0 ]; then echo "make test: FAILED"; else echo "make test: all passed"; fi; \
	exit $$status

test-asan:
	@echo "== ASan+UBSan build ($(ASAN_BUILD_DIR), $(ASAN_CC))"
	$(CONFIGURE_ASAN)
	$(CMAKE) --build $(ASAN_BUILD_DIR) --parallel $(JOBS)
	$(CTEST) --test-dir $(ASAN_BUILD_DIR) --output-on-failure -j$(JOBS)

test-tsan:
	@echo "== ThreadSanitizer build ($(TSAN_BUILD_DIR), $(FUZZ_CC))"
	$(CONFIGURE_TSAN)
	$(CMAKE) --build $(TSAN_BUILD_DIR) --parallel $(JOBS) --target $(CF_TSAN_TESTS)
	$(CTEST) --test-dir $(TSAN_BUILD_DIR) --output-on-failure -j$(JOBS) -L concurrent

demo: deps build
	scripts/demo.sh $(BUILD_DIR)
	scripts/demo-redis.sh $(BUILD_DIR)
	scripts/demo-kv.sh $(BUILD_DIR)

# cf-bench-speed first (its tables are what the README quotes), then the other benchmarks
# unless this is a --quick smoke run. The target fails if a benchmark found a wrong answer
# (a false negative), never on timings.
bench: build
	@status=0; \
	if [ -x $(BUILD_DIR)/cf-bench-speed ]; then \
		echo "== $(BUILD_DIR)/cf-bench-speed $(BENCH_ARGS)"; \
		$(BUILD_DIR)/cf-bench-speed $(BENCH_ARGS) || status=1; \
	else \
		echo "make bench: $(BUILD_DIR)/cf-bench-speed was not built (CF_BUILD_BENCH=OFF?)"; status=1; \
	fi; \
	for b in $(if $(filter --quick,$(BENCH_ARGS)),,$(BUILD_DIR)/cf-bench-*); do \
		[ -x "$$b" ] && [ "$$b" != $(BUILD_DIR)/cf-bench-speed ] || continue; \
		[ "$$b" != $(BUILD_DIR)/cf-bench-batch ] || continue; \
		echo "== $$b"; \
		"$$b" || status=1; \
	done; \
	exit $$status

figures: deps build
	bench/figures.sh $(BUILD_DIR)

# The Redis module against Redis sets on a private redis-server (about 80 s; QUICK=1 for
# a smoke run of a few seconds).
bench-icount: deps build
	bench/icount.sh $(BUILD_DIR)/cf-bench-icount

# cf-bench-batch is bench-python's baseline (it takes arguments): make bench leaves it out.
bench-python: build
	PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) bench/python_bench.py \
		--baseline $(BUILD_DIR)/cf-bench-batch

bench-cli: build
	bench/cli_query.sh $(BUILD_DIR)/cuckoo 10000000 3 1 2

bench-redis: deps build
	/usr/bin/python3 bench/redis_bench.py --module $(BUILD_DIR)/redis-cuckoofilter.so $(if $(QUICK),--quick)
	/usr/bin/python3 bench/redis_loadchunk.py --module $(BUILD_DIR)/redis-cuckoofilter.so \
		$(if $(QUICK),--capacity 20000000)

# The fuzzer adds what it finds to the scratch corpus (kept between runs; the committed
# seeds are copied in again each time) and writes a crashing input to artifacts/, its
# name prefixed with the target's (ops-crash-<sha1>, ...).
fuzz: deps
	@if [ ! -f fuzz/fuzz_$(FUZZ_TARGET).c ] || [ ! -d fuzz/corpus/$(FUZZ_TARGET) ]; then \
		echo "make fuzz: no fuzz target '$(FUZZ_TARGET)' (FUZZ_TARGET=ops, deserialize, chunks, segments," \
		     "module, kvlog or keys: fuzz/fuzz_<target>.c and fuzz/corpus/<target>/)" >&2; \
		exit 2; \
	fi
	@echo "== libFuzzer build ($(FUZZ_BUILD_DIR), $(FUZZ_CC)), target fuzz_$(FUZZ_TARGET)"
	$(CONFIGURE_FUZZ)
	$(CMAKE) --build $(FUZZ_BUILD_DIR) --parallel $(JOBS) --target fuzz_$(FUZZ_TARGET)
	@mkdir -p $(FUZZ_CORPUS) $(FUZZ_BUILD_DIR)/artifacts
	cp fuzz/corpus/$(FUZZ_TARGET)/* $(FUZZ_CORPUS)/
	@status=0; \
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		$(FUZZ_BUILD_DIR)/fuzz/fuzz_$(FUZZ_TARGET) -max_total_time=$(FUZZ_SECONDS) \
		-timeout=30 -print_final_stats=1 \
		-artifact_prefix=$(FUZZ_BUILD_DIR)/artifacts/$(FUZZ_TARGET)- \
		$(FUZZ_ARGS) $(FUZZ_CORPUS) || status=$$?; \
	if [ $$status -ne 0 ]; then \
		echo "make fuzz: FAILED; the input is in $(FUZZ_BUILD_DIR)/artifacts/ (fuzz/README.md" \
		     "says how to reproduce it and add it to the corpus)"; \
	fi; \
	exit $$status

# cmake --install honours DESTDIR from the environment. The manifest (paths without
# DESTDIR) is kept under its own name because every `cmake --install` (the
# install_consumer test too) rewrites install_manifest.txt. Uninstall with the same DESTDIR.
install: $(if $(CONFIGURE_NEEDED),configure)
	$(CMAKE) --build $(BUILD_DIR) --parallel $(JOBS) --target cf_installables
	DESTDIR="$(DESTDIR)" $(CMAKE) --install $(BUILD_DIR) --prefix $(PREFIX)
	cp $(BUILD_DIR)/install_manifest.txt $(BUILD_DIR)/make_install_manifest.txt

# Debian's own tooling (debian/: debhelper, pybuild for the Python package) on a copy of
# the source in $(DEB_BUILD_DIR)/src, so that the tree stays clean; the packages and their
# -dbgsym companions land in $(DEB_BUILD_DIR). PATH is the system's: pybuild builds for
# Debian's python3, not one a version manager put first.
deb: deps
	rm -rf $(DEB_BUILD_DIR) && mkdir -p $(DEB_BUILD_DIR)/src
	tar -c --exclude=./.git --exclude='./build*' --exclude=./obj-\* . | tar -x -C $(DEB_BUILD_DIR)/src
	cd $(DEB_BUILD_DIR)/src && env PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		DEB_BUILD_OPTIONS="parallel=$(JOBS)" dpkg-buildpackage -b -us -uc
	@ls -1 $(DEB_BUILD_DIR)/*.deb

uninstall:
	@if [ ! -f $(BUILD_DIR)/make_install_manifest.txt ]; then \
		echo "make uninstall: no $(BUILD_DIR)/make_install_manifest.txt (run make install first)" >&2; \
		exit 1; \
	fi
	@while IFS= read -r f || [ -n "$$f" ]; do \
		f="$(DESTDIR)$$f"; \
		if [ -e "$$f" ] || [ -L "$$f" ]; then echo "rm $$f"; rm -f "$$f"; fi; \
	done < $(BUILD_DIR)/make_install_manifest.txt
	@for d in $$(sed -n 's|/cmake/cuckoofilter/.*|/cmake/cuckoofilter|p' \
			$(BUILD_DIR)/make_install_manifest.txt | sort -u); do \
		rmdir "$(DESTDIR)$$d" 2>/dev/null || true; \
	done
	@# The Python package's directory, with the bytecode Python wrote there.
	@for d in $$(sed -n 's|/cuckoofilter/__init__\.py$$|/cuckoofilter|p' \
			$(BUILD_DIR)/make_install_manifest.txt | sort -u); do \
		rm -rf "$(DESTDIR)$$d/__pycache__"; rmdir "$(DESTDIR)$$d" 2>/dev/null || true; \
	done
	rm -f $(BUILD_DIR)/make_install_manifest.txt

# Both use the file list of tests/format_check.sh (the ctest check).
format:
	CLANG_FORMAT=$(CLANG_FORMAT) tests/format_check.sh --fix .

format-check:
	CLANG_FORMAT=$(CLANG_FORMAT) tests/format_check.sh .

clean:
	rm -rf $(BUILD_DIR) $(ASAN_BUILD_DIR) $(TSAN_BUILD_DIR) $(FUZZ_BUILD_DIR) $(DEB_BUILD_DIR)

help:
	@sed -n '1,/^$$/p' Makefile
