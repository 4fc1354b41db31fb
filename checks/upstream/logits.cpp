// Whole-model logits through llama.h alone, for the upstream check (checks/upstream): built
// once against the patched tree and once against the pinned tree without Strata's patches,
// the two must write the same bytes for every model.
//
// usage: strata_logits MODEL OUT TOKENS STEPS
//   TOKENS: comma-separated prompt ids; STEPS: greedy decode steps after the prompt.
// OUT gets the prompt's last logits, then each step's, as raw float32 (n_vocab per row).
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char ** argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s MODEL OUT TOKENS STEPS\n", argv[0]);
        return 2;
    }
    std::vector<llama_token> tokens;
    for (std::string rest = argv[3]; !rest.empty();) {
        const size_t comma = rest.find(',');
        tokens.push_back((llama_token) std::atoi(rest.substr(0, comma).c_str()));
        rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    }
    const int steps = std::atoi(argv[4]);
    if (tokens.empty() || steps < 0) {
        fprintf(stderr, "need at least one token and steps >= 0\n");
        return 2;
    }

    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx           = 1024;
    cp.n_batch         = 512;
    cp.n_ubatch        = 512;
    cp.n_seq_max       = 1;
    cp.n_threads       = 2;
    cp.n_threads_batch = 2;
    cp.no_perf         = true;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "cannot create a context\n");
        return 1;
    }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    FILE * out = fopen(argv[2], "wb");
    if (!out) {
        fprintf(stderr, "cannot write %s\n", argv[2]);
        return 1;
    }
    for (int step = 0; step <= steps; ++step) {
        if (llama_decode(ctx, llama_batch_get_one(tokens.data(), (int32_t) tokens.size())) != 0) {
            fprintf(stderr, "decode failed at step %d\n", step);
            return 1;
        }
        const float * logits = llama_get_logits_ith(ctx, -1);
        fwrite(logits, sizeof(float), n_vocab, out);
        int best = 0;
        for (int i = 1; i < n_vocab; ++i) {
            if (logits[i] > logits[best]) best = i;
        }
        tokens.assign(1, best);
    }
    fclose(out);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
