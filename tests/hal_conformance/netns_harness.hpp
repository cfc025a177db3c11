// make_harness for the backends that need two network namespaces (EmuRt, Verbs): skipped where
// namespaces are unavailable to a non-root user; as root, a testbed that cannot be built fails.
#pragma once

#include "harness.hpp"
#include "netns_util.hpp"

#include <unistd.h>

#include <memory>
#include <string>

namespace sdr::hal_conformance {

// H: the backend's harness, with bool init(std::string* why).
template <class H>
std::unique_ptr<Harness> make_netns_harness(std::string* why, bool* skip)
{
    *skip = false;
    if (std::string no = sdr::test::netns_unavailable(); !no.empty()) {
        *skip = geteuid() != 0;
        *why = no;
        return nullptr;
    }
    auto h = std::make_unique<H>();
    if (!h->init(why)) return nullptr;
    return h;
}

}  // namespace sdr::hal_conformance
