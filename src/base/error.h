// Errors with context: every failure the user can cause (a bad file, a bad
// config, a bad request) is reported as one line naming the input and what was
// expected, never as a crash.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace duet {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Concatenates any streamable values into one string.
template <typename... Parts>
std::string str_cat(Parts&&... parts) {
    std::ostringstream out;
    (out << ... << std::forward<Parts>(parts));
    return out.str();
}

// Throws duet::Error with the concatenated message.
template <typename... Parts>
[[noreturn]] void fail(Parts&&... parts) {
    throw Error(str_cat(std::forward<Parts>(parts)...));
}

// Checks a condition that depends on user input; throws with the message when it is false.
template <typename... Parts>
void require(bool condition, Parts&&... parts) {
    if (!condition) fail(std::forward<Parts>(parts)...);
}

}  // namespace duet
