/*
 * A program that uses an installed libcuckoofilter the way a user would: built by
 * tests/install_consumer.sh through find_package() and through pkg-config, against the
 * shared and the static library. Exit status 0 when the filter works.
 */
#include <cuckoofilter.h>
#include <stdio.h>

int main(void)
{
    cf_config config = {.capacity = 1000, .seed = 7};
    cf_filter *filter = NULL;
    cf_status status = cf_new(&config, &filter);

    if (status != CF_OK) {
        fprintf(stderr, "consumer: cf_new: %s\n", cf_strerror(status));
        return 1;
    }
    status = cf_add(filter, "consumer", 8);
    if (status != CF_OK) {
        fprintf(stderr, "consumer: cf_add: %s\n", cf_strerror(status));
        cf_free(filter);
        return 1;
    }
    if (!cf_contains(filter, "consumer", 8)) {
        fprintf(stderr, "consumer: an added key is missing\n");
        cf_free(filter);
        return 1;
    }
    cf_free(filter);
    printf("consumer: libcuckoofilter %s (header %d.%d.%d)\n", cf_version(), CF_VERSION_MAJOR,
           CF_VERSION_MINOR, CF_VERSION_PATCH);
    return 0;
}
