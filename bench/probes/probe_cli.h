// The probes' command lines (CLI11): each probe declares its own options on `app`; M,N,K shapes are the
// positional arguments, added and parsed here. Returns -1 when the probe should go on, else the status for
// main to return: 0 after --help, 2 for bad input (the error is printed).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "rlgemm/error.h"
#include "rlgemm/problem.h"

namespace rlgemm::probes {

inline int parse_command_line(CLI::App& app, int argc, char** argv, std::vector<Shape>& shapes,
                              bool shapes_required = true) {
  std::vector<std::string> texts;
  CLI::Option* positional = app.add_option("shapes", texts, "problem shapes M,N,K");
  if (shapes_required) positional->required();
  try {
    app.parse(argc, argv);
    for (const std::string& text : texts) shapes.push_back(parse_shape(text));
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: %s\n", app.get_name().c_str(), e.what());
    return 2;
  }
  return -1;
}

}  // namespace rlgemm::probes
