// Tool calling in a model's own chat format, by llama.cpp's chat machinery (common/chat.cpp: the
// GGUF's Jinja template rendered with the tools, the grammar that keeps an answer to the calls
// the template describes, and the parser that reads them back). For the gateway: native builds
// with STRATA_CHAT only. Requests and results cross as JSON text.
#include "strata.h"
#include "strata-internal.h"

#include "chat.h"
#include "common.h"
#include "json-schema-to-grammar.h"
#include "json.h"

#include <cctype>
#include <string>
#include <vector>

struct strata_chat {
    common_chat_templates_ptr tmpls;
    const llama_model *       model = nullptr;
};

namespace {

// The caller's buffer gets s (its full length returned); or the reason, and STRATA_ERR_INPUT.
int32_t answer(const std::string & s, char * buf, int32_t cap) {
    if (s.size() > (size_t) STRATA_MAX_GRAMMAR * 64) return STRATA_ERR_INPUT;
    return strata_copy_str(s, buf, cap);
}

int32_t refuse(const std::string & why, char * err, int32_t err_cap) {
    if (err && err_cap > 0) strata_copy_str(why, err, err_cap);
    return STRATA_ERR_INPUT;
}

bool bad_buf(const void * p, int32_t cap) { return cap < 0 || (!p && cap > 0); }

// The grammar's triggers as llama_sampler_init_grammar_lazy_patterns takes them (what
// common_sampler_init does with them).
void triggers_of(const common_chat_params & p, common_json & patterns, common_json & tokens) {
    for (const auto & t : p.grammar_triggers) {
        switch (t.type) {
            case COMMON_GRAMMAR_TRIGGER_TYPE_WORD:
                patterns.push_back(regex_escape(t.value));
                break;
            case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN:
                patterns.push_back(t.value);
                break;
            case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN_FULL: {
                std::string anchored = "^$";
                if (!t.value.empty()) {
                    anchored = (t.value.front() != '^' ? "^" : "") + t.value + (t.value.back() != '$' ? "$" : "");
                }
                patterns.push_back(anchored);
                break;
            }
            case COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN:
                tokens.push_back(t.token);
                break;
        }
    }
}

// The generation prompt's tokens, which a tool grammar's root begins with (fed to it before the
// first sampled token; common_sampler_init's rule for a leading space).
common_json prefill_of(const llama_vocab * vocab, const std::string & generation_prompt) {
    common_json out = common_json::array();
    const auto tokens = common_tokenize(vocab, generation_prompt, false, true);
    for (size_t i = 0; i < tokens.size(); ++i) {
        const std::string piece = common_token_to_piece(vocab, tokens[i], true);
        if (i == 0 && !piece.empty() && std::isspace((unsigned char) piece[0]) &&
            !std::isspace((unsigned char) generation_prompt[0])) {
            continue;
        }
        out.push_back(tokens[i]);
    }
    return out;
}

} // namespace

extern "C" {

strata_chat * strata_chat_new(const strata_model * model, char * err, int32_t err_cap) {
    const llama_model * m = strata_model_llama(model);
    if (!m) {
        refuse("chat: no model", err, err_cap);
        return nullptr;
    }
    try {
        auto * c = new strata_chat;
        c->model = m;
        c->tmpls = common_chat_templates_init(m, "");
        return c;
    } catch (const std::exception & x) {
        refuse(std::string("chat: ") + x.what(), err, err_cap);
        return nullptr;
    }
}

void strata_chat_free(strata_chat * chat) { delete chat; }

int32_t strata_chat_caps(const strata_chat * chat, char * buf, int32_t cap) {
    if (!chat || bad_buf(buf, cap)) return STRATA_ERR_INPUT;
    try {
        common_json caps = common_json::object();
        for (const auto & [k, v] : common_chat_templates_get_caps(chat->tmpls.get())) caps[k] = v;
        return answer(caps.dump(), buf, cap);
    } catch (const std::exception &) {
        return STRATA_ERR_ENGINE;
    }
}

int32_t strata_chat_apply_tools(const strata_chat * chat, const char * req, int32_t len, char * buf, int32_t cap,
                                char * err, int32_t err_cap) {
    if (!chat) return refuse("chat: no templates", err, err_cap);
    if (!req || len <= 0 || len > STRATA_MAX_GRAMMAR * 64) return refuse("chat: no request", err, err_cap);
    if (bad_buf(buf, cap)) return refuse("chat: NULL buffer with a nonzero capacity", err, err_cap);
    try {
        const auto r = common_json::parse(std::string(req, (size_t) len));
        common_chat_templates_inputs in;
        in.messages            = common_chat_msgs_parse_oaicompat(r.at("messages"));
        in.tools               = common_chat_tools_parse_oaicompat(r.at("tools"));
        in.tool_choice         = common_chat_tool_choice_parse_oaicompat(r.at("tool_choice").get<std::string>());
        in.parallel_tool_calls = r.at("parallel_tool_calls").get<bool>();
        in.use_jinja           = true;
        in.enable_thinking     = false;
        const common_chat_params p = common_chat_templates_apply(chat->tmpls.get(), in);

        common_json patterns = common_json::array();
        common_json tokens   = common_json::array();
        triggers_of(p, patterns, tokens);
        common_json out = common_json::object();
        out["prompt"]            = p.prompt;
        out["grammar"]           = p.grammar;
        out["lazy"]              = p.grammar_lazy;
        out["trigger_patterns"]  = patterns;
        out["trigger_tokens"]    = tokens;
        out["prefill"]           = !p.grammar_lazy && !p.grammar.empty()
                                       ? prefill_of(llama_model_get_vocab(chat->model), p.generation_prompt)
                                       : common_json::array();
        out["additional_stops"]  = common_json(p.additional_stops);
        out["preserved_tokens"]  = common_json(p.preserved_tokens);
        // what strata_chat_parse needs back
        out["parser"]            = common_json::object();
        out["parser"]["format"]  = (int) p.format;
        out["parser"]["arena"]   = p.parser;
        out["parser"]["generation_prompt"] = p.generation_prompt;
        return answer(out.dump(), buf, cap);
    } catch (const std::exception & x) {
        return refuse(std::string("chat: ") + x.what(), err, err_cap);
    }
}

int32_t strata_chat_parse(const char * parser, int32_t parser_len, const char * text, int32_t text_len, char * buf,
                          int32_t cap, char * err, int32_t err_cap) {
    if (!parser || parser_len <= 0 || (!text && text_len > 0) || text_len < 0) {
        return refuse("chat parse: no parser or no text", err, err_cap);
    }
    if (bad_buf(buf, cap)) return refuse("chat parse: NULL buffer with a nonzero capacity", err, err_cap);
    try {
        const auto p = common_json::parse(std::string(parser, (size_t) parser_len));
        common_chat_parser_params params;
        params.format            = (common_chat_format) p.at("format").get<int>();
        params.generation_prompt = p.at("generation_prompt").get<std::string>();
        params.parse_tool_calls  = true;
        params.parser.load(p.at("arena").get<std::string>());
        const common_chat_msg msg = common_chat_parse(std::string(text ? text : "", (size_t) text_len), false, params);
        common_json out = common_json::object();
        out["content"]    = msg.content;
        out["tool_calls"] = common_json::array();
        for (const auto & tc : msg.tool_calls) {
            common_json c = common_json::object();
            c["name"]      = tc.name;
            c["arguments"] = tc.arguments;
            c["id"]        = tc.id;
            out["tool_calls"].push_back(c);
        }
        return answer(out.dump(), buf, cap);
    } catch (const std::exception & x) {
        return refuse(std::string("chat parse: ") + x.what(), err, err_cap);
    }
}

} // extern "C"
