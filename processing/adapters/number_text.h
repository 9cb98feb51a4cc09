// Numbers in messages, logs and legend labels: at most `digits` significant digits, in exponent form
// when very large or small (never the hundreds of digits of a coordinate near 1e308).
#pragma once

#include <QString>

namespace gpugeo {

inline QString number(double value, int digits = 10)
{
  return QString::number(value, 'g', digits);
}

}  // namespace gpugeo
