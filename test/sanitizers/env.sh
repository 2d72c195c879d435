# test/sanitizers/env.sh - sourced before every test of a sanitizer build
# (AM_TESTS_ENVIRONMENT; GPUCOLL_SANITIZERS is configure's
# --enable-sanitizers list, empty otherwise). Sets the sanitizers' runtime
# options; options already in the environment come after ours, and win.
# docs/testing.md, "Sanitizers", explains each choice.
_san_user_asan=${ASAN_OPTIONS:-}
_san_user_tsan=${TSAN_OPTIONS:-}
case ",${GPUCOLL_SANITIZERS:-}," in
*,address,*)
    # halt_on_error: the first report ends the program with exit status 1,
    # which fails the test. Leaks are reported at exit (the unit tests; the
    # MPI tests turn leak detection off, see test/mpi/mpi-env.sh).
    ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=1"
    ASAN_OPTIONS="$ASAN_OPTIONS:check_initialization_order=1:strict_init_order=1"
    ASAN_OPTIONS="$ASAN_OPTIONS${_san_user_asan:+:$_san_user_asan}"
    export ASAN_OPTIONS
    # hwloc's pci plugin (libpciaccess) leaks ~1 KB per discovery of this
    # machine, in a module unloaded before LeakSanitizer reports (so no
    # suppression can name it); hwloc's linux component reads the same PCI
    # tree from sysfs.
    HWLOC_COMPONENTS=${HWLOC_COMPONENTS:--pci}
    export HWLOC_COMPONENTS
    # Programs not built here that load the instrumented component
    # (ompi_info) need the ASan runtime loaded first.
    GPUCOLL_SAN_PRELOAD=$(${CC:-cc} -print-file-name=libasan.so)
    export GPUCOLL_SAN_PRELOAD
    ;;
esac
case ",${GPUCOLL_SANITIZERS:-}," in
*,undefined,*)
    # Built with -fno-sanitize-recover=all: a report aborts the program.
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
    export UBSAN_OPTIONS
    ;;
esac
case ",${GPUCOLL_SANITIZERS:-}," in
*,thread,*)
    TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
    TSAN_OPTIONS="$TSAN_OPTIONS${_san_user_tsan:+:$_san_user_tsan}"
    export TSAN_OPTIONS
    ;;
esac
unset _san_user_asan _san_user_tsan
