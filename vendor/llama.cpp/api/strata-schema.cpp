// JSON Schema to a GBNF grammar with llama.cpp's own converter (common/json-schema-to-grammar),
// for the gateway: what it makes is what strata_grammar_new takes. Native builds with STRATA_CHAT.
#include "strata.h"
#include "strata-internal.h"

#include "common.h"
#include "json-schema-to-grammar.h"
#include "json.h"

#include <string>

extern "C" {

int32_t strata_json_schema_grammar(const char * schema, int32_t len, char * buf, int32_t cap,
                                   char * err, int32_t err_cap) {
    std::string why;
    if (len <= 0 || !schema) {
        why = "schema: empty";
    } else if (len > STRATA_MAX_GRAMMAR) {
        why = "schema: " + std::to_string(len) + " bytes, more than " + std::to_string(STRATA_MAX_GRAMMAR);
    } else if (cap < 0 || (!buf && cap > 0)) {
        why = "schema: NULL buffer with a nonzero capacity";
    } else {
        try {
            const std::string g = json_schema_to_grammar(common_json::parse(std::string(schema, (size_t) len)));
            if ((int64_t) g.size() > STRATA_MAX_GRAMMAR) {
                why = "schema: its grammar would take " + std::to_string(g.size()) + " bytes, more than " +
                      std::to_string(STRATA_MAX_GRAMMAR);
            } else {
                return strata_copy_str(g, buf, cap);
            }
        } catch (const std::exception & x) {
            why = std::string("schema: ") + x.what();
        } catch (...) {
            why = "schema: refused";
        }
    }
    if (err && err_cap > 0) strata_copy_str(why, err, err_cap);
    return STRATA_ERR_INPUT;
}

} // extern "C"
