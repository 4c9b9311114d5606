#include "cli/commands.h"

namespace duet::cli {

int threads_flag(const Args& args) { return static_cast<int>(args.integer_or("--threads", 0, 0, 1024)); }

int64_t context_flag(const Args& args) { return args.integer_or("--ctx", 4096, 1, 1 << 24); }

}  // namespace duet::cli
