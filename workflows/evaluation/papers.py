"""The seed papers' own figures, printed beside ours (facts from the papers' tables)."""

from __future__ import annotations

from margin.workflows.registry import AGENTSIMP, FEEDBACK, LAY, SOMS

# Each: where the figures come from, and named rows of metric -> value (the papers' scales).
PAPER_FIGURES: dict[str, dict[str, object]] = {
    LAY: {
        "source": "JRE-L, Table 1 (readability of the generated articles; lower is easier)",
        "not_comparable": {
            "fkgl": "textstat's formulas on our sentence splitting; the paper's tool is not named",
        },
        "rows": {
            "JRE-L, eLife": {"cli": 11.60, "fkgl": 10.10, "dcrs": 9.46},
            "JRE-L, PLOS": {"cli": 12.74, "fkgl": 10.00, "dcrs": 9.69},
            "JRE-L, average of 3 datasets": {"average": 10.69},
            "Plain summaries (human), eLife": {"cli": 12.52, "fkgl": 10.91, "dcrs": 8.94},
            "Plain summaries (human), PLOS": {"cli": 15.90, "fkgl": 14.76, "dcrs": 10.91},
            "GPT-4, eLife": {"cli": 13.96, "fkgl": 10.87, "dcrs": 10.11},
        },
    },
    SOMS: {
        "source": "Society of Medical Simplifiers, Table 1 (Cochrane)",
        "not_comparable": {
            "bleu": "corpus sacreBLEU here; the paper does not say which BLEU implementation it used",
        },
        "rows": {
            "Society of Medical Simplifiers": {
                "sari": 40.04,
                "fkgl": 11.40,
                "ari": 12.81,
                "bleu": 8.40,
                "rouge1": 28.03,
                "rouge2": 9.61,
            },
            "NapSS": {
                "sari": 40.37,
                "fkgl": 10.97,
                "ari": 14.27,
                "bleu": 12.30,
                "rouge1": 48.05,
                "rouge2": 19.94,
            },
        },
    },
    AGENTSIMP: {
        "source": "AgentSimp, Table 2 (Newsela)",
        "not_comparable": {
            "sari": "Cochrane abstracts cut into 3-sentence paragraphs here, against Newsela documents in the paper",
            "d_sari": "Cochrane abstracts cut into 3-sentence paragraphs here, against Newsela documents in the paper",
            "fkgl": "Cochrane abstracts cut into 3-sentence paragraphs here, against Newsela documents in the paper",
        },
        "rows": {
            "AgentSimp PL + iterative, GPT-4": {"sari": 41.58, "d_sari": 30.72, "fkgl": 8.42},
            "AgentSimp PL + iterative, GPT-3.5": {"sari": 39.26, "d_sari": 28.53, "fkgl": 8.21},
            "AgentSimp SYNC + direct, GPT-4": {"sari": 39.78, "d_sari": 27.49, "fkgl": 8.83},
            "GPT-4, one prompt": {"sari": 33.61, "d_sari": 22.67, "fkgl": 7.58},
        },
    },
    FEEDBACK: {
        "source": "SWIF2T, Tables 5 and 6",
        "not_comparable": {
            "meteor": "NLTK's METEOR without WordNet synonyms (that data would be downloaded at run time)",
            "bleu4": "corpus sacreBLEU here; the paper's BLEU@4 implementation is not stated",
        },
        "rows": {
            "SWIF2T": {
                "label_accuracy": 34.00,
                "f1_soundness": 31.40,
                "f1_meaningful_comparison": 38.00,
                "f1_replicability": 42.90,
                "f1_originality": 38.90,
                "f1_substance": 25.37,
                "meteor": 20.04,
                "bleu4": 30.06,
                "rougeL": 20.44,
            },
            "GPT-4": {
                "label_accuracy": 24.00,
                "f1_soundness": 30.60,
                "f1_meaningful_comparison": 8.70,
                "f1_replicability": 41.30,
                "f1_originality": 6.60,
                "f1_substance": 9.20,
                "meteor": 18.13,
                "bleu4": 28.50,
                "rougeL": 18.37,
            },
        },
    },
}
