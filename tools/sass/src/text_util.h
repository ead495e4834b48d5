// Small string helpers shared by the text parsers.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fastattn::sass {

std::string_view trim(std::string_view s);
std::vector<std::string_view> split_lines(std::string_view text);
std::vector<std::string> split_words(std::string_view s);
bool starts_with(std::string_view s, std::string_view prefix);

}  // namespace fastattn::sass
