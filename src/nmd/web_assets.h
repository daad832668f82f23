// The web console's files (web/*.html, *.js, *.css, web/views/*.js), compiled into the daemon by
// cmake/embed_files.cmake so that `galaxy nmd` serves the console with nothing installed beside
// it; `galaxy nmd --web DIR` serves a directory instead (console development).
#pragma once

#include <span>
#include <string_view>

namespace galaxy::nmd {

struct WebAsset {
  std::string_view path;  // relative to web/, e.g. "index.html", "views/topology.js"
  std::string_view body;
};

std::span<const WebAsset> web_assets();

}  // namespace galaxy::nmd
