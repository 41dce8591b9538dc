// The SystemC library expects an sc_main; the fuzzers run under libFuzzer's main instead.
extern "C" int sc_main(int, char**) { return 0; }
