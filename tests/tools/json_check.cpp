// json_check: exits 0 when every non-empty line of stdin is one valid JSON object, 1 (naming
// the line and the parser's complaint) otherwise; 1 also for no object at all.
#include <nlohmann/json.hpp>

#include <iostream>
#include <string>

int main()
{
    std::string line;
    int objects = 0, n = 0;
    while (std::getline(std::cin, line)) {
        n++;
        if (line.empty()) continue;
        try {
            if (!nlohmann::json::parse(line).is_object()) {
                std::cerr << "json_check: line " << n << " is JSON but not an object\n";
                return 1;
            }
        } catch (const nlohmann::json::parse_error& e) {
            std::cerr << "json_check: line " << n << ": " << e.what() << "\n" << line << "\n";
            return 1;
        }
        objects++;
    }
    if (!objects) std::cerr << "json_check: no JSON object on stdin\n";
    return objects ? 0 : 1;
}
