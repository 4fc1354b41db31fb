// Constrained decoding: llama.cpp's grammar sampler over a model's vocabulary, for the node
// that samples (native and WASM alike). See strata.h for the contract.
//
// Its own translation unit: the WASM build compiles this file alone with exception catching
// (llama.cpp's grammar parser reports errors by throwing), so that a bad grammar from a peer is
// an error code here and never reaches the rest of the engine, whose calls may suspend.
#include "strata.h"
#include "strata-internal.h"

#include "llama.h"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

struct strata_grammar {
    const llama_vocab *           vocab = nullptr;
    llama_sampler *               smpl  = nullptr;
    std::vector<llama_token_data> cand;
    std::string                   err;
};

namespace {

int32_t grammar_fail(strata_grammar * g, int32_t code, const std::string & msg) {
    g->err = msg;
    return code;
}

// Whether the grammar allows `token` next: the one-candidate form of apply (no throw).
bool allows(strata_grammar * g, llama_token token) {
    llama_token_data one = { token, 0.0f, 0.0f };
    llama_token_data_array arr = { &one, 1, -1, false };
    llama_sampler_apply(g->smpl, &arr);
    return std::isfinite(one.logit);
}

} // namespace

extern "C" {

strata_grammar * strata_grammar_new(const strata_model * model, const char * text, int32_t len,
                                    const char * patterns, int32_t patterns_len, int32_t n_patterns,
                                    const int32_t * tokens, int32_t n_tokens, char * err, int32_t err_cap) {
    std::string why;
    strata_grammar * g = nullptr;
    const llama_model * m = strata_model_llama(model);
    // the triggers: every pattern must end inside the bytes given
    std::vector<const char *> pats;
    for (int32_t off = 0, i = 0; why.empty() && i < n_patterns; ++i) {
        const void * nul = patterns && off < patterns_len ? memchr(patterns + off, 0, (size_t) (patterns_len - off)) : nullptr;
        if (!nul) {
            why = "grammar: trigger " + std::to_string(i) + " runs past the " + std::to_string(patterns_len) + " bytes given";
        } else {
            pats.push_back(patterns + off);
            off = (int32_t) ((const char *) nul - patterns) + 1;
        }
    }
    if (!why.empty()) {
    } else if (n_patterns < 0 || n_tokens < 0 || n_patterns > 1024 || n_tokens > 1024 || (!tokens && n_tokens > 0)) {
        why = "grammar: triggers: counts from 0 to 1024, and tokens for a nonzero count";
    } else if (!m) {
        why = "grammar: no model";
    } else if (!text && len > 0) {
        why = "grammar: NULL text with a length of " + std::to_string(len);
    } else if (len <= 0) {
        why = "grammar: empty";
    } else if (len > STRATA_MAX_GRAMMAR) {
        why = "grammar: " + std::to_string(len) + " bytes, more than " + std::to_string(STRATA_MAX_GRAMMAR);
    } else if (memchr(text, 0, (size_t) len)) {
        why = "grammar: a NUL byte inside the text";
    } else {
        try {
            strata_log_tail(true);
            const std::string src(text, (size_t) len);
            g = new strata_grammar;
            g->vocab = llama_model_get_vocab(m);
            const int32_t n_vocab = llama_vocab_n_tokens(g->vocab);
            std::vector<llama_token> toks;
            for (int32_t i = 0; i < n_tokens; ++i) {
                if (tokens[i] < 0 || tokens[i] >= n_vocab) {
                    throw std::runtime_error("trigger token " + std::to_string(tokens[i]) + " outside the vocabulary");
                }
                toks.push_back(tokens[i]);
            }
            g->smpl = pats.empty() && toks.empty()
                          ? llama_sampler_init_grammar(g->vocab, src.c_str(), "root")
                          : llama_sampler_init_grammar_lazy_patterns(g->vocab, src.c_str(), "root", pats.data(),
                                                                     pats.size(), toks.data(), toks.size());
            if (!g->smpl) {
                const std::string tail = strata_log_tail();
                why = "grammar: " + (tail.empty() ? std::string("llama.cpp refused it") : tail);
            }
        } catch (const std::exception & x) {
            why = std::string("grammar: ") + x.what();
        } catch (...) {
            why = "grammar: refused";
        }
        if (!why.empty() && g) {
            if (g->smpl) llama_sampler_free(g->smpl);
            delete g;
            g = nullptr;
        }
    }
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    if (!g && err && err_cap > 0) strata_copy_str(why, err, err_cap);
    return g;
}

void strata_grammar_free(strata_grammar * g) {
    if (!g) return;
    llama_sampler_free(g->smpl);
    delete g;
}

int32_t strata_grammar_error(const strata_grammar * g, char * buf, int32_t cap) {
    if (!g || cap < 0 || (!buf && cap > 0)) return STRATA_ERR_INPUT;
    return strata_copy_str(g->err, buf, cap);
}

int32_t strata_grammar_apply(strata_grammar * g, float * logits, int32_t n) {
    if (!g) return STRATA_ERR_INPUT;
    const int32_t n_vocab = llama_vocab_n_tokens(g->vocab);
    if (!logits) return grammar_fail(g, STRATA_ERR_INPUT, "grammar: logits is NULL");
    if (n != n_vocab) {
        return grammar_fail(g, STRATA_ERR_INPUT, "grammar: " + std::to_string(n) + " logits for a vocabulary of " +
                                                     std::to_string(n_vocab));
    }
    try {
        // tokens already banned (logit_bias -100) need no look
        g->cand.clear();
        for (int32_t i = 0; i < n; ++i) {
            if (logits[i] != -INFINITY) g->cand.push_back({ i, logits[i], 0.0f });
        }
        llama_token_data_array arr = { g->cand.data(), g->cand.size(), -1, false };
        llama_sampler_apply(g->smpl, &arr);
        int32_t allowed = 0;
        for (const auto & c : g->cand) {
            if (c.logit == -INFINITY) logits[c.id] = -INFINITY;
            else ++allowed;
        }
        return allowed;
    } catch (const std::exception & x) {
        return grammar_fail(g, STRATA_ERR_ENGINE, std::string("grammar: ") + x.what());
    }
}

int32_t strata_grammar_accept(strata_grammar * g, int32_t token) {
    if (!g) return STRATA_ERR_INPUT;
    if (token < 0 || token >= llama_vocab_n_tokens(g->vocab)) {
        return grammar_fail(g, STRATA_ERR_INPUT, "grammar: token id " + std::to_string(token) + " outside the vocabulary");
    }
    try {
        // checked first: llama.cpp throws (or, for an end-of-generation token, aborts) on a
        // token its grammar does not allow
        if (!allows(g, token)) {
            return grammar_fail(g, STRATA_ERR_INPUT, "grammar: token " + std::to_string(token) + " is not allowed here");
        }
        // an end-of-generation token ends the text: nothing is left to advance
        if (!llama_vocab_is_eog(g->vocab, token)) llama_sampler_accept(g->smpl, token);
        return 0;
    } catch (const std::exception & x) {
        return grammar_fail(g, STRATA_ERR_ENGINE, std::string("grammar: ") + x.what());
    }
}

} // extern "C"
