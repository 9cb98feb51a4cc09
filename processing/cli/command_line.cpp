#include "cli/command_line.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace gpugeo::cli {

Arguments::Arguments(int argc, char** argv, int first, const std::vector<OptionSpec>& specs)
{
  for (int i = first; i < argc; ++i)
  {
    const std::string word = argv[i];
    if (word.rfind("--", 0) != 0 || word.size() < 3)
      throw UsageError{"unexpected argument '" + word + "' (options start with --)"};
    std::string name = word.substr(2), value;
    const std::size_t equals = name.find('=');
    bool inlineValue = false;
    if (equals != std::string::npos)
    {
      value = name.substr(equals + 1);
      name = name.substr(0, equals);
      inlineValue = true;
    }
    const OptionSpec* spec = nullptr;
    for (const OptionSpec& s : specs)
      if (s.name == name)
        spec = &s;
    if (!spec)
      throw UsageError{"unknown option --" + name};
    if (mValues.count(name))
      throw UsageError{"--" + name + " is given twice"};
    if (spec->value.empty())
    {
      if (inlineValue)
        throw UsageError{"--" + name + " takes no value"};
    }
    else if (!inlineValue)
    {
      if (i + 1 >= argc)
        throw UsageError{"--" + name + " needs a value (" + spec->value + ")"};
      value = argv[++i];
    }
    mValues[name] = value;
  }
}

std::string Arguments::text(const std::string& name, const std::string& fallback) const
{
  const auto it = mValues.find(name);
  return it == mValues.end() ? fallback : it->second;
}

std::string Arguments::required(const std::string& name) const
{
  const auto it = mValues.find(name);
  if (it == mValues.end() || it->second.empty())
    throw UsageError{"--" + name + " is required"};
  return it->second;
}

double Arguments::number(const std::string& name, double fallback) const
{
  const auto it = mValues.find(name);
  if (it == mValues.end())
    return fallback;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
    throw UsageError{"--" + name + " takes a number, not '" + it->second + "'"};
  return v;
}

int64_t Arguments::integer(const std::string& name, int64_t fallback) const
{
  const auto it = mValues.find(name);
  if (it == mValues.end())
    return fallback;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || errno == ERANGE)
    throw UsageError{"--" + name + " takes a whole number, not '" + it->second + "'"};
  return int64_t(v);
}

int Arguments::choice(const std::string& name, const std::vector<std::string>& choices, int fallback) const
{
  const auto it = mValues.find(name);
  if (it == mValues.end())
    return fallback;
  for (std::size_t k = 0; k < choices.size(); ++k)
    if (choices[k] == it->second)
      return int(k);
  std::string list;
  for (const std::string& c : choices)
    list += (list.empty() ? "" : ", ") + c;
  throw UsageError{"--" + name + " is one of " + list + ", not '" + it->second + "'"};
}

std::string optionsHelp(const std::vector<OptionSpec>& specs)
{
  std::ostringstream out;
  for (const OptionSpec& s : specs)
  {
    std::string head = "  --" + s.name + (s.value.empty() ? "" : " " + s.value);
    if (head.size() < 30)
      head.resize(30, ' ');
    else
      head += "\n" + std::string(30, ' ');
    // The help wrapped at 100 columns under its option.
    std::istringstream words(s.help);
    std::string word, line = head;
    bool first = true;
    while (words >> word)
    {
      if (!first && line.size() + 1 + word.size() > 100)
      {
        out << line << "\n";
        line = std::string(30, ' ');
        first = true;
      }
      line += (first ? "" : " ") + word;
      first = false;
    }
    out << line << "\n";
  }
  return out.str();
}

}  // namespace gpugeo::cli
