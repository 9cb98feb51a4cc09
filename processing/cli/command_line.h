// The command-line program's arguments: `gpugeo_dem <tool> --name value ... [--flag ...]`, each
// option once, checked against the tool's list of options (a usage error names what is wrong).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace gpugeo::cli {

// A mistake in the arguments: the program prints it with a pointer to --help and exits with 2.
struct UsageError
{
  std::string text;
};

struct OptionSpec
{
  std::string name;      // without the leading dashes
  std::string value;     // what the value is, for the help ("PATH", "MiB"); empty: a flag
  std::string help;
};

class Arguments
{
public:
  // Parses argv[first..] against `specs`; throws UsageError.
  Arguments(int argc, char** argv, int first, const std::vector<OptionSpec>& specs);

  bool has(const std::string& name) const { return mValues.count(name) > 0; }
  std::string text(const std::string& name, const std::string& fallback = {}) const;
  std::string required(const std::string& name) const;
  double number(const std::string& name, double fallback) const;
  int64_t integer(const std::string& name, int64_t fallback) const;
  bool flag(const std::string& name) const { return has(name); }
  // One of `choices` (their index); `fallback` when absent.
  int choice(const std::string& name, const std::vector<std::string>& choices, int fallback) const;

private:
  std::map<std::string, std::string> mValues;
};

// The help of a tool: its purpose, then one line per option.
std::string optionsHelp(const std::vector<OptionSpec>& specs);

}  // namespace gpugeo::cli
