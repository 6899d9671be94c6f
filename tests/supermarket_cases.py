"""Published numbers shared by ``test_supermarket`` and ``test_meanfield`` (a helper, not collected).

From N. Gast, L. Bortolussi, M. Tribastone, "Size expansions of mean field
approximation: transient and steady-state analysis", Performance Evaluation 2018
(IFIP Performance 2018); LaTeX source github.com/ngast/sizeExpansionMeanField,
paper/sizeExpansionMeanField.tex. Typed once here, so both test files check the
same table.
"""

#: Table tab:SIS (the malware model): N, exact E[X], pi + V/N
MALWARE = [(5, 0.5929041, 0.5933126), (10, 0.6055449, 0.6056733),
           (20, 0.6118184, 0.6118536), (50, 0.6155559, 0.6155619)]

# Table tab:supermarket (Gast, Bortolussi & Tribastone 2018): N, k(=d), rho, mean field, 1/N expansion
PUBLISHED_RMF = [(10, 2, 0.7, 1.1301, 1.2150), (20, 2, 0.7, 1.1301, 1.1726), (10, 2, 0.9, 2.3527, 2.7513),
                 (20, 2, 0.9, 2.3527, 2.5520), (10, 2, 0.95, 3.2139, 4.1017), (20, 2, 0.95, 3.2139, 3.6578),
                 (10, 3, 0.9, 1.8251, 2.2364), (50, 3, 0.9, 1.8251, 1.9073), (100, 3, 0.9, 1.8251, 1.8662),
                 (10, 4, 0.95, 2.0771, 2.9834), (100, 4, 0.95, 2.0771, 2.1678)]
