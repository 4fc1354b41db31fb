// What the C API's translation units share with each other (nothing here is exported).
#pragma once

#include "strata.h"

#include <string>

struct llama_model;

// The llama.cpp model behind a handle (NULL for NULL).
const llama_model * strata_model_llama(const strata_model * model);
// The last warning or error llama.cpp logged on this thread ("" when none), cleared by clear.
std::string strata_log_tail(bool clear = false);
// Copies s into buf (NUL-terminated, cut to cap); returns s's full length.
int32_t strata_copy_str(const std::string & s, char * buf, int32_t cap);
