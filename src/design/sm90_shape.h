// The tile-level constants of an sm90 design as its kernel derives them (kernels/sm90/params.h): the one place a
// Design becomes an sm90::Shape, for the design rules' accounting and the generator's launch plan alike.
#pragma once

#include "kernels/sm90/params.h"
#include "rlgemm/design.h"

namespace rlgemm {

inline sm90::Shape sm90_shape(const Design& d) {
  return sm90::Shape{d.bm,
                     d.bn,
                     d.bk,
                     d.stages,
                     d.schedule == Sm90Schedule::kPingpong,
                     d.epilogue == Epilogue::kTma,
                     d.schedule == Sm90Schedule::kCooperativeColumns};
}

}  // namespace rlgemm
